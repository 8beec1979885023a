//! A pair of keys as one key (route + client, user + tenant...).

use super::{KeyError, KeyExtractor};
use http::request::Parts;
use std::fmt;

/// Two extractors whose keys together form the key; fails if either fails.
/// `Composite::new(Route, PeerIp::new())` limits each client per route.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::key::{Composite, PeerIp, Route};
/// use tower_ratelimit::{Gcra, MemoryStore, RateLimitLayer};
///
/// // 100 per minute per client IP on each route.
/// let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()), Composite::new(Route, PeerIp::new()));
/// # let _ = layer;
/// ```
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
///
/// ```
/// use tower_ratelimit::key::{CompositeKey, GlobalKey, IpPrefixes};
///
/// let ip = IpPrefixes::DEFAULT.key("203.0.113.7".parse().unwrap());
/// assert_eq!(CompositeKey(ip, GlobalKey).to_string(), "203.0.113.7|global");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompositeKey<A, B>(pub A, pub B);

impl<A: fmt::Display, B: fmt::Display> fmt::Display for CompositeKey<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}", self.0, self.1)
    }
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for Composite<A, B> {
    type Key = CompositeKey<A::Key, B::Key>;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<Self::Key, KeyError> {
        Ok(CompositeKey(
            self.first.extract(req)?,
            self.second.extract(req)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Route;
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
