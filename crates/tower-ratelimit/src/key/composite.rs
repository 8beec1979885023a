//! Composite keys: the route, and a pair of keys (route + client, user + tenant...).

use super::secret::hashed;
use super::{HeaderKey, KeyError, KeyExtractor};
use http::request::Parts;
use http::Method;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Keys by method and route: axum's `MatchedPath` (the route pattern, like
/// `/users/{id}`) when present, otherwise the request path, kept as a
/// [`HeaderKey`]: up to 64 bytes as is, a longer path as its keyed hash,
/// so a key takes at most 112 bytes however long the made-up paths a
/// client sends (see the [module docs](super#memory-per-key)). Combine it with
/// a client key through [`Composite`] to limit each client on each route
/// separately with one store.
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

/// The key of [`Route`]: `POST /users/{id}`.
#[derive(Debug, Clone)]
pub struct RouteKey {
    method: Method,
    path: RoutePath,
}

#[derive(Debug, Clone)]
enum RoutePath {
    #[cfg(feature = "axum")]
    Matched(axum::extract::MatchedPath),
    Raw(HeaderKey),
}

impl RouteKey {
    /// The method (an extension method longer than 15 bytes as `#` and 32
    /// hex digits of its keyed hash).
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The route pattern, the path, or (for a path longer than 64 bytes)
    /// `#` and the 32 hex digits of its keyed hash.
    pub fn path(&self) -> &str {
        match &self.path {
            #[cfg(feature = "axum")]
            RoutePath::Matched(m) => m.as_str(),
            RoutePath::Raw(p) => p.as_str(),
        }
    }
}

impl PartialEq for RouteKey {
    fn eq(&self, other: &Self) -> bool {
        self.method == other.method && self.path() == other.path()
    }
}

impl Eq for RouteKey {}

impl Hash for RouteKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.method.as_str().hash(state);
        self.path().hash(state);
    }
}

impl fmt::Display for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path())
    }
}

impl KeyExtractor for Route {
    type Key = RouteKey;

    fn extract(&self, req: &Parts) -> Result<RouteKey, KeyError> {
        #[cfg(feature = "axum")]
        if let Some(m) = req.extensions.get::<axum::extract::MatchedPath>() {
            return Ok(RouteKey {
                method: method(&req.method)?,
                path: RoutePath::Matched(m.clone()),
            });
        }
        Ok(RouteKey {
            method: method(&req.method)?,
            path: RoutePath::Raw(HeaderKey::new(req.uri.path().as_bytes())),
        })
    }
}

/// `method`, or for an extension method longer than 15 bytes (which
/// `Method` would allocate for), `#` and the 32 hex digits of its keyed
/// hash: a client cannot grow a key by sending a long made-up method.
fn method(method: &Method) -> Result<Method, KeyError> {
    let text = method.as_str();
    if text.len() <= 15 {
        return Ok(method.clone());
    }
    Method::from_bytes(hashed(text.as_bytes()).as_bytes())
        .map_err(|_| KeyError::malformed("request method"))
}

/// Two extractors whose keys together form the key; fails if either fails.
/// `Composite::new(Route, PeerIp::new())` limits each client per route.
#[derive(Debug, Clone, Copy, Default)]
pub struct Composite<A, B> {
    first: A,
    second: B,
}

impl<A, B> Composite<A, B> {
    /// `first` and `second`.
    pub const fn new(first: A, second: B) -> Self {
        Self { first, second }
    }
}

/// The key of [`Composite`]; displays as `first|second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pair<A, B>(pub A, pub B);

impl<A: fmt::Display, B: fmt::Display> fmt::Display for Pair<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}", self.0, self.1)
    }
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for Composite<A, B> {
    type Key = Pair<A::Key, B::Key>;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<Self::Key, KeyError> {
        Ok(Pair(self.first.extract(req)?, self.second.extract(req)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Global, PeerAddr, PeerIp};

    #[test]
    fn route_and_client() {
        let mut p = http::Request::post("/a/b?x=1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        p.extensions.insert(PeerAddr("1.2.3.4:5".parse().unwrap()));
        let k = Composite::new(Route, PeerIp::new()).extract(&p).unwrap();
        assert_eq!(k.to_string(), "POST /a/b|1.2.3.4");
        assert_eq!(Global.extract(&p).unwrap().to_string(), "global");
        let long = format!("/{}", "x".repeat(100));
        let p = http::Request::get(&long).body(()).unwrap().into_parts().0;
        let k = Route.extract(&p).unwrap();
        assert!(k.path().starts_with('#') && k.path().len() == 33);
        assert_eq!(k, Route.extract(&p).unwrap());
        let long = "X".repeat(1000);
        let p = http::Request::builder()
            .method(long.as_str())
            .uri("/")
            .body(())
            .unwrap();
        let k = Route.extract(&p.into_parts().0).unwrap();
        assert!(k.method().as_str().starts_with('#') && k.method().as_str().len() == 33);
        let p = http::Request::builder()
            .method("PURGE")
            .uri("/")
            .body(())
            .unwrap();
        assert_eq!(
            Route.extract(&p.into_parts().0).unwrap().to_string(),
            "PURGE /"
        );
    }
}
