//! [`PaceLayer`]: the tower layer that paces bodies per key, cheap to clone.

use super::service::PaceService;
use super::shared::PaceShared;
use crate::key::KeyExtractor;
use crate::response::ProblemJson;
use std::fmt;
use std::sync::Arc;
use tower_layer::Layer;

/// Paces request or response bodies to a rate per key: see the
/// [module docs](super).
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::pace::{PaceLayer, Paced};
/// use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore};
///
/// let bytes = Gcra::new(1 << 20, Duration::from_secs(1)).unwrap();
/// let upload = PaceLayer::builder("upload", MemoryStore::new(bytes), PeerIp::new(), 16 << 10)
///     .paced(Paced::Requests)
///     .build()
///     .unwrap();
/// assert_eq!(upload.name(), "upload");
/// ```
///
/// Clones share everything, the store included: the budget holds across
/// clones, routes and, with a shared store (Redis), instances.
pub struct PaceLayer<X: KeyExtractor, St, R = ProblemJson> {
    pub(crate) shared: Arc<PaceShared<X, St, R>>,
}

impl<X: KeyExtractor, St, R> PaceLayer<X, St, R> {
    /// The store the layer charges.
    pub fn store(&self) -> &Arc<St> {
        &self.shared.store
    }

    /// The layer's name (in logs and metric labels).
    pub fn name(&self) -> &'static str {
        self.shared.name
    }
}

impl<X: KeyExtractor, St, R> Clone for PaceLayer<X, St, R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<X: KeyExtractor, St, R> fmt::Debug for PaceLayer<X, St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceLayer")
            .field("name", &self.shared.name)
            .field("paced", &self.shared.paced)
            .field("piece", &self.shared.piece)
            .field("after", &self.shared.after)
            .finish_non_exhaustive()
    }
}

impl<S, X: KeyExtractor, St, R> Layer<S> for PaceLayer<X, St, R> {
    type Service = PaceService<S, X, St, R>;

    fn layer(&self, inner: S) -> Self::Service {
        PaceService {
            inner,
            shared: self.shared.clone(),
        }
    }
}
