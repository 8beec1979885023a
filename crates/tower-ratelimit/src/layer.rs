//! [`RateLimitLayer`]: the tower layer, cheap to clone, sharing its limits.

use crate::key::KeyExtractor;
use crate::response::ProblemJson;
use crate::service::RateLimit;
use crate::shared::Shared;
#[cfg(doc)]
use ratelimit_core::Store;
use std::fmt;
use std::sync::Arc;
use tower_layer::Layer;

/// Applies rate limits to an HTTP service: see the [crate docs](crate).
///
/// ```
/// use axum::{routing::get, Router};
/// use std::time::Duration;
/// use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};
///
/// let store = MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap());
/// let layer = RateLimitLayer::new(store, PeerIp::new());
/// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(layer);
/// # let _ = app;
/// ```
///
/// `X` extracts the key, `St` is the store ([`MemoryStore`] or a remote
/// one), `R` builds rejections. Clones share everything, including the
/// stores: the limit holds across clones, threads and routes that use the
/// same layer.
///
/// [`MemoryStore`]: ratelimit_core::MemoryStore
pub struct RateLimitLayer<X: KeyExtractor, St, R = ProblemJson> {
    pub(crate) shared: Arc<Shared<X, St, R>>,
}

impl<X: KeyExtractor, St, R> RateLimitLayer<X, St, R> {
    /// The store of the limit named `name` (`default` for
    /// [`new`](RateLimitLayer::new)): the very store the layer checks, to
    /// reset, ban or unban a key ([`Store::reset`], [`Store::ban`]) or
    /// read its state while the layer runs.
    ///
    /// ```
    /// use ratelimit_core::{Gcra, MemoryStore, Store};
    /// use std::time::Duration;
    /// use tower_ratelimit::{key::PeerIp, RateLimitLayer};
    ///
    /// let store = MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap());
    /// let layer = RateLimitLayer::new(store, PeerIp::new());
    /// let store = layer.store("default").unwrap();
    /// # let ip: tower_ratelimit::key::IpKey = tower_ratelimit::key::IpPrefixes::default().key([203, 0, 113, 7].into());
    /// store.reset(&ip).value().unwrap();
    /// ```
    pub fn store(&self, name: &str) -> Option<&Arc<St>> {
        self.shared
            .limits
            .iter()
            .find(|l| l.name == name)
            .map(|l| &l.store)
    }
}

impl<X: KeyExtractor, St, R> Clone for RateLimitLayer<X, St, R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<X: KeyExtractor, St, R> fmt::Debug for RateLimitLayer<X, St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.shared.limits.iter().map(|l| l.name).collect();
        f.debug_struct("RateLimitLayer")
            .field("limits", &names)
            .field("mode", &self.shared.mode)
            .finish_non_exhaustive()
    }
}

impl<S, X: KeyExtractor, St, R> Layer<S> for RateLimitLayer<X, St, R> {
    type Service = RateLimit<S, X, St, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            shared: self.shared.clone(),
        }
    }
}
