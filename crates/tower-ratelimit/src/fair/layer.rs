//! The fair queue's layer and its builder, and the adaptive limit's own layer.

use super::queue::State;
use super::shared::Shared;
use super::{AdaptiveLimit, Capacity, FairQueue, FairQueueBuildError};
use crate::key::{Global, KeyExtractor};
use crate::response::ProblemJson;
use crate::strategy::Cost;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower_layer::Layer;

/// A layer that fair-queues requests per key in front of a concurrency
/// limit; see [the module](super).
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::convert::Infallible;
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{fair::FairQueueLayer, key::Global};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = FairQueueLayer::builder(Global).concurrency(2).build().unwrap();
/// let inner = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// let res = layer.layer(inner).oneshot(Request::new(())).await.unwrap();
/// assert_eq!(res.status(), 200);
/// # }
/// ```
pub struct FairQueueLayer<X: KeyExtractor, R = ProblemJson> {
    shared: Arc<Shared<X, R>>,
}

impl<X: KeyExtractor, R> Clone for FairQueueLayer<X, R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<X: KeyExtractor, R> fmt::Debug for FairQueueLayer<X, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairQueueLayer")
            .field("name", &self.shared.name)
            .field("capacity", &self.shared.capacity)
            .field("max_per_key", &self.shared.max_per_key)
            .field("max_wait", &self.shared.max_wait)
            .finish_non_exhaustive()
    }
}

impl<S, X: KeyExtractor, R> Layer<S> for FairQueueLayer<X, R> {
    type Service = FairQueue<S, X, R>;

    fn layer(&self, inner: S) -> Self::Service {
        FairQueue {
            inner,
            shared: self.shared.clone(),
        }
    }
}

impl<X: KeyExtractor> FairQueueLayer<X>
where
    X::Key: Hash + Eq + Clone,
{
    /// A fair queue keyed by `key`: by default 16 at once, 8 waiting per
    /// key, 256 in all, waiting at most 30 s, each request costing 1.
    pub fn builder(key: X) -> FairQueueBuilder<X> {
        FairQueueBuilder {
            key,
            cost: None,
            response: ProblemJson::new(),
            capacity: Capacity::Fixed(16),
            max_per_key: 8,
            max_total: 256,
            max_wait: Duration::from_secs(30),
            quantum: 1,
            name: "fair-queue",
        }
    }
}

/// Builds a [`FairQueueLayer`]; see [`FairQueueLayer::builder`].
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::fair::{FairQueueBuildError, FairQueueLayer};
/// use tower_ratelimit::key::Global;
///
/// let builder = || FairQueueLayer::builder(Global).max_wait(Duration::from_secs(5));
/// assert!(builder().max_per_key(4).max_total(32).build().is_ok());
/// let err = builder().max_per_key(10).max_total(5).build().unwrap_err();
/// assert_eq!(err, FairQueueBuildError::PerKeyAboveTotal { per_key: 10, total: 5 });
/// ```
pub struct FairQueueBuilder<X, R = ProblemJson> {
    key: X,
    cost: Option<Box<dyn Cost>>,
    response: R,
    capacity: Capacity,
    max_per_key: usize,
    max_total: usize,
    max_wait: Duration,
    quantum: u64,
    name: &'static str,
}

impl<X, R> fmt::Debug for FairQueueBuilder<X, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairQueueBuilder")
            .field("name", &self.name)
            .field("capacity", &self.capacity)
            .field("max_per_key", &self.max_per_key)
            .field("max_total", &self.max_total)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl<X: KeyExtractor, R> FairQueueBuilder<X, R>
where
    X::Key: Hash + Eq + Clone,
{
    /// At most `n` requests in the inner service at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.capacity = Capacity::Fixed(n);
        self
    }

    /// At most as many requests at once as `limit` says now; each request's
    /// latency is reported to it.
    pub fn adaptive(mut self, limit: AdaptiveLimit) -> Self {
        self.capacity = Capacity::Adaptive(limit);
        self
    }

    /// At most as many requests at once as `capacity` says: a number, an
    /// [`AdaptiveLimit`], or a [`Capacity`].
    pub fn capacity(mut self, capacity: impl Into<Capacity>) -> Self {
        self.capacity = capacity.into();
        self
    }

    /// At most `n` requests of one key wait (8 by default); more get 429.
    pub fn max_per_key(mut self, n: usize) -> Self {
        self.max_per_key = n;
        self
    }

    /// At most `n` requests wait in all (256 by default); more get 503. 0
    /// makes a plain concurrency limit that answers 503 when full.
    pub fn max_total(mut self, n: usize) -> Self {
        self.max_total = n;
        self
    }

    /// A request waiting longer than `d` gets 503 (30 s by default).
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// What a request costs in the round robin (1 by default; clamped to
    /// 1..=64 quanta, so a cost of 0 counts as 1): a key is served about
    /// `quantum` cost units per turn. A [`Cost`], or a closure of the
    /// request head.
    ///
    /// ```
    /// use http::request::Parts;
    /// use tower_ratelimit::{fair::FairQueueLayer, key::PeerIp};
    ///
    /// // An export takes ten turns' worth of the queue.
    /// let layer = FairQueueLayer::builder(PeerIp::new())
    ///     .cost(|req: &Parts| if req.uri.path().starts_with("/export") { 10 } else { 1 })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn cost(mut self, cost: impl Cost) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// The cost units a key is credited per turn (1 by default).
    pub fn quantum(mut self, quantum: u64) -> Self {
        self.quantum = quantum;
        self
    }

    /// The queue's name: the denied limit's name in 429s, and the label in
    /// traces and metrics (`"fair-queue"` by default).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Answers refused requests with `response` instead of
    /// [`ProblemJson`]: a [`ResponseBuilder`](crate::response::ResponseBuilder),
    /// or a closure of the [`Rejection`](crate::response::Rejection).
    ///
    /// ```
    /// use axum::body::Body;
    /// use tower_ratelimit::response::Rejection;
    /// use tower_ratelimit::{fair::FairQueueLayer, key::PeerIp};
    ///
    /// let layer = FairQueueLayer::builder(PeerIp::new())
    ///     .response(|_rejection: Rejection<'_>| {
    ///         http::Response::builder().status(503).body(Body::from("busy")).unwrap()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn response<R2>(self, response: R2) -> FairQueueBuilder<X, R2> {
        FairQueueBuilder {
            key: self.key,
            cost: self.cost,
            response,
            capacity: self.capacity,
            max_per_key: self.max_per_key,
            max_total: self.max_total,
            max_wait: self.max_wait,
            quantum: self.quantum,
            name: self.name,
        }
    }

    /// The layer, or what is wrong with its settings.
    pub fn build(self) -> Result<FairQueueLayer<X, R>, FairQueueBuildError> {
        if let Capacity::Fixed(0) = self.capacity {
            return Err(FairQueueBuildError::ZeroConcurrency);
        }
        if self.max_per_key > self.max_total {
            return Err(FairQueueBuildError::PerKeyAboveTotal {
                per_key: self.max_per_key,
                total: self.max_total,
            });
        }
        if self.quantum == 0 {
            return Err(FairQueueBuildError::ZeroQuantum);
        }
        Ok(FairQueueLayer {
            shared: Arc::new(Shared {
                key: self.key,
                cost: self.cost,
                response: self.response,
                capacity: self.capacity,
                state: Mutex::new(State::new(self.max_per_key, self.max_total, self.quantum)),
                max_wait: self.max_wait,
                max_per_key: self.max_per_key,
                name: self.name,
                service: AtomicU64::new(0),
                no_peer_logged: AtomicBool::new(false),
            }),
        })
    }
}

impl AdaptiveLimit {
    /// A layer that lets at most this limit's current value into the inner
    /// service at once and answers the others 503 at once (no queue),
    /// reporting each request's latency to the limit.
    pub fn layer(&self) -> FairQueueLayer<Global> {
        let built = FairQueueLayer::builder(Global)
            .adaptive(self.clone())
            .max_per_key(0)
            .max_total(0)
            .name("adaptive")
            .build();
        match built {
            Ok(layer) => layer,
            // The settings above are valid.
            Err(e) => unreachable!("{e}"),
        }
    }
}
