//! Composite keys: the route, and a pair of keys (route + client, user + tenant...).

use super::{KeyError, KeyExtractor};
use http::request::Parts;
use http::Method;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Keys by method and route: axum's `MatchedPath` (the route pattern, like
/// `/users/{id}`) when present, otherwise the request path. Combine it with
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
    Raw(Arc<str>),
}

impl RouteKey {
    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The route pattern or path.
    pub fn path(&self) -> &str {
        match &self.path {
            #[cfg(feature = "axum")]
            RoutePath::Matched(m) => m.as_str(),
            RoutePath::Raw(p) => p,
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
                method: req.method.clone(),
                path: RoutePath::Matched(m.clone()),
            });
        }
        Ok(RouteKey {
            method: req.method.clone(),
            path: RoutePath::Raw(req.uri.path().into()),
        })
    }
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
    }
}
