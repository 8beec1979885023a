//! [`PaceBuilder`]: a pace layer's settings, checked once in `build`.

use super::error::{PaceBuildError, MAX_PIECE};
use super::layer::PaceLayer;
use super::paced::Paced;
use super::shared::PaceShared;
use crate::key::KeyExtractor;
use crate::response::ProblemJson;
use crate::strategy::KeyErrorPolicy;
use ratelimit_core::{Clock, Store};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl<X: KeyExtractor, St: Store<X::Key>> PaceLayer<X, St> {
    /// Paces response bodies of each key (found by `key`) to the rate of
    /// `store`'s algorithm, charging pieces of at most `piece` bytes, with
    /// the defaults of [`builder`](Self::builder). The store comes before
    /// the key, as in [`RateLimitLayer::new`](crate::RateLimitLayer::new),
    /// named by `name` (in logs and metric labels).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_ratelimit::pace::PaceLayer;
    /// use tower_ratelimit::{key::PeerIp, MemoryStore, TokenBucket};
    ///
    /// // 256 KiB/s per client IP, 64 KiB of burst, in pieces of 16 KiB.
    /// let bytes = TokenBucket::new(64 << 10, 256 << 10, Duration::from_secs(1)).unwrap();
    /// let layer = PaceLayer::new("download", MemoryStore::new(bytes), PeerIp::new(), 16 << 10).unwrap();
    /// # let _ = layer;
    /// ```
    pub fn new(
        name: impl Into<String>,
        store: St,
        key: X,
        piece: u64,
    ) -> Result<Self, PaceBuildError> {
        Self::builder(name, store, key, piece).build()
    }

    /// A builder: which bodies ([`Paced`](super::Paced)), bytes let
    /// through unpaced first, the clock, key errors.
    pub fn builder(name: impl Into<String>, store: St, key: X, piece: u64) -> PaceBuilder<X, St> {
        PaceBuilder::new(name.into(), key, Arc::new(store), piece)
    }
}

/// Builds a [`PaceLayer`]: see [`PaceLayer::builder`].
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::pace::{PaceLayer, Paced};
/// use tower_ratelimit::{key::Global, MemoryStore, TokenBucket};
///
/// let bytes = TokenBucket::new(64 << 10, 256 << 10, Duration::from_secs(1)).unwrap();
/// let builder = PaceLayer::builder("both", MemoryStore::new(bytes), Global, 16 << 10);
/// // Both directions share one budget; the first bytes of each body are free.
/// let layer = builder.paced(Paced::Both).after(4 << 10).build().unwrap();
/// assert_eq!(layer.name(), "both");
/// ```
pub struct PaceBuilder<X: KeyExtractor, St, R = ProblemJson> {
    name: String,
    key: X,
    store: Arc<St>,
    piece: u64,
    after: u64,
    paced: Paced,
    clock: Option<Arc<dyn Clock>>,
    on_key_error: KeyErrorPolicy,
    response: R,
    skip: Option<fn(&X::Key) -> bool>,
}

impl<X: KeyExtractor, St: Store<X::Key>> PaceBuilder<X, St> {
    pub(crate) fn new(name: String, key: X, store: Arc<St>, piece: u64) -> Self {
        Self {
            name,
            key,
            store,
            piece,
            after: 0,
            paced: Paced::default(),
            clock: None,
            on_key_error: KeyErrorPolicy::default(),
            response: ProblemJson::new(),
            skip: None,
        }
    }
}

impl<X: KeyExtractor, St, R> PaceBuilder<X, St, R> {
    /// Which bodies are paced (default: responses).
    pub fn paced(mut self, paced: Paced) -> Self {
        self.paced = paced;
        self
    }

    /// The first `bytes` of each body go unpaced, as nginx's
    /// `limit_rate_after` (default 0). They are not charged.
    pub fn after(mut self, bytes: u64) -> Self {
        self.after = bytes;
        self
    }

    /// The clock of the checks (default: the system clock every layer
    /// shares; tests give a [`TokioClock`](ratelimit_core::TokioClock), which
    /// follows `tokio::time::pause`), or an `Arc<dyn Clock>` shared with
    /// other layers. Sleeps are tokio's.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(clock.into_shared());
        self
    }

    /// What to do with a request without a usable key (default: reject it
    /// with the key error's 4xx; let through, its bodies are not paced).
    pub fn on_key_error(mut self, policy: KeyErrorPolicy) -> Self {
        self.on_key_error = policy;
        self
    }

    /// What a rejected request gets (key errors only: a paced request is
    /// never refused).
    pub fn response<R2>(self, response: R2) -> PaceBuilder<X, St, R2> {
        PaceBuilder {
            name: self.name,
            key: self.key,
            store: self.store,
            piece: self.piece,
            after: self.after,
            paced: self.paced,
            clock: self.clock,
            on_key_error: self.on_key_error,
            response,
            skip: self.skip,
        }
    }

    /// Keys whose bodies go unpaced (a table's routes the limit does not
    /// cover).
    #[cfg(feature = "table")]
    pub(crate) fn skip(mut self, skip: fn(&X::Key) -> bool) -> Self {
        self.skip = Some(skip);
        self
    }

    /// The layer, or the first setting that cannot work.
    pub fn build(self) -> Result<PaceLayer<X, St, R>, PaceBuildError> {
        if self.piece == 0 {
            return Err(PaceBuildError::ZeroPiece);
        }
        if self.piece > MAX_PIECE {
            return Err(PaceBuildError::PieceTooLarge(self.piece));
        }
        let printable = |b: u8| (0x21..=0x7e).contains(&b);
        if self.name.is_empty() || self.name.len() > 64 || !self.name.bytes().all(printable) {
            return Err(PaceBuildError::BadName(self.name));
        }
        let shared = PaceShared {
            name: Box::leak(self.name.into_boxed_str()),
            key: self.key,
            store: self.store,
            piece: self.piece,
            after: self.after,
            paced: self.paced,
            clock: self.clock.unwrap_or_else(crate::clock::default_clock),
            on_key_error: self.on_key_error,
            response: self.response,
            skip: self.skip,
            no_peer_logged: AtomicBool::new(false),
        };
        Ok(PaceLayer {
            shared: Arc::new(shared),
        })
    }
}
