//! A route a limit applies to (`RouteSpec`): a method (or any) and a path.

use axum::extract::MatchedPath;
use http::request::Parts;
use http::Method;
use std::fmt;
use std::str::FromStr;

impl fmt::Display for RouteSpec {
    /// `METHOD /path`, or `/path` for any method.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{m} {}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// A route an entry applies to: a method (or any) and a path.
///
/// ```
/// use tower_ratelimit::policy::RouteSpec;
///
/// let route: RouteSpec = "POST /login".parse().unwrap();
/// assert_eq!(route.to_string(), "POST /login");
/// assert!("FETCH login".parse::<RouteSpec>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    method: Option<Method>,
    path: String,
}

impl FromStr for RouteSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (method, path) = match s.trim().split_once(' ') {
            Some((m, p)) => {
                // Methods are case-sensitive (RFC 9110): `post` is an
                // extension method no client sends for POST.
                if m.bytes().any(|b| b.is_ascii_lowercase()) {
                    return Err(format!(
                        "bad method {m:?} in route {s:?}: methods are case-sensitive, \
                         write {:?}",
                        m.to_ascii_uppercase()
                    ));
                }
                let m =
                    Method::from_str(m).map_err(|_| format!("bad method {m:?} in route {s:?}"))?;
                (Some(m), p.trim())
            }
            None => (None, s.trim()),
        };
        if !path.starts_with('/') || path.contains(char::is_whitespace) {
            return Err(format!(
                "bad route {s:?}: expected \"/path\" or \"METHOD /path\""
            ));
        }
        Ok(Self {
            method,
            path: path.to_owned(),
        })
    }
}

impl RouteSpec {
    pub(super) fn matches(&self, req: &Parts) -> bool {
        // A GET route covers HEAD too: axum answers HEAD with the GET
        // handler, so a HEAD must not pass the GET's limit.
        let covers =
            |m: &Method| *m == req.method || (*m == Method::GET && req.method == Method::HEAD);
        if self.method.as_ref().is_some_and(|m| !covers(m)) {
            return false;
        }
        match req.extensions.get::<MatchedPath>() {
            Some(m) => m.as_str() == self.path,
            None => req.uri.path() == self.path,
        }
    }
}
