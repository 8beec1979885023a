//! The route as a key: the method and the matched path (or the path).

use super::digest::hashed;
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
/// a client key through [`Composite`](super::Composite) to limit each client on each route
/// separately with one store.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::Route, Gcra, MemoryStore, RateLimitLayer};
///
/// // 100 per minute on each route, all clients together.
/// let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()), Route);
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

/// The key of [`Route`]: `POST /users/{id}`.
///
/// ```
/// use tower_ratelimit::key::{KeyExtractor, Route};
///
/// let (parts, ()) = http::Request::post("/users/7").body(()).unwrap().into_parts();
/// let key = Route.extract(&parts).unwrap(); // a RouteKey
/// assert_eq!((key.method().as_str(), key.path()), ("POST", "/users/7"));
/// ```
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
    /// hex digits of its digest).
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The route pattern, the path, or (for a path longer than 64 bytes)
    /// `#` and the 32 hex digits of its digest.
    pub fn path(&self) -> &str {
        match &self.path {
            #[cfg(feature = "axum")]
            RoutePath::Matched(m) => m.as_str(),
            RoutePath::Raw(p) => p.stored(),
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
            // The request holds its path: the key keeps the stored form only.
            path: RoutePath::Raw(HeaderKey::new(req.uri.path().as_bytes()).into_digest()),
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
