//! Overload protection beyond fixed quotas: fair queuing per client, and a
//! concurrency limit that adapts to latency.
//!
//! [`FairQueueLayer`] lets at most C requests into the inner service at
//! once. The others wait in a FIFO queue per key (the same
//! [`KeyExtractor`]s as [`RateLimitLayer`](crate::RateLimitLayer)), and
//! the queues are served in turn by deficit round robin with each
//! request's [`Cost`] as its share of the quantum: with k busy keys, each
//! gets 1/k of the places, so a client that floods congests only its own
//! queue.
//!
//! - Bounded per key and in total: a request that cannot be queued gets
//!   `503 Service Unavailable` when the whole queue is full, otherwise
//!   `429 Too Many Requests` when its own key's queue is; one that waits past
//!   [`max_wait`](FairQueueBuilder::max_wait) gets 503. Each carries
//!   `Retry-After` (the time to drain the queue at the measured service
//!   time, at least 1 s). The responses come from the same
//!   [`ResponseBuilder`](crate::response::ResponseBuilder) as the rate-limit layer's: a 429 is a
//!   [`Rejection::Limited`](crate::response::Rejection::Limited) whose
//!   denied limit is named after the queue, a 503 a
//!   [`Rejection::Unavailable`](crate::response::Rejection::Unavailable).
//! - Cancel-safe: a waiting request that is dropped (its client went away)
//!   leaves its queue at once, and a place granted to it is passed on.
//! - Memory bounded under a key flood: a key has state only while it has
//!   waiting requests, so the table holds at most the total queue length
//!   of keys; with every place taken, a flood of new keys gets 503s and
//!   allocates nothing. The other side of that bound: a flood from many
//!   keys at once (each up to its own bound) can fill the whole queue, and
//!   every new client then gets 503 until places free. Keep
//!   `max_per_key` small against `max_total`, and key by network where
//!   floods come from many addresses (IPv6 keys are /64 already).
//! - A request without a key gets the key error's 4xx (the same
//!   [`Rejection::KeyError`](crate::response::Rejection::KeyError) as the
//!   rate-limit layer's default policy); it is never queued.
//! - Decided in `call` (`poll_ready` is always ready), answered with a
//!   response, never an error; layer and service are `Clone + Send + Sync`
//!   (clones share the queue).
//!
//! A place is held from admission until the inner service's response
//! future completes (the response head), like `tower::limit::ConcurrencyLimit`,
//! not until the body is sent.
//!
//! [`AdaptiveLimit`] is a concurrency limit that follows latency (AIMD of
//! each round's p99 against a target, growing while that raises
//! throughput). Given to a fair queue
//! ([`FairQueueBuilder::adaptive`]) the queue serves the adaptive
//! capacity: it reads the current limit when it admits and reports each
//! request's latency, so the limit sits in front of the queue and the
//! queue shares out whatever the backend can take now.
//!
//! ```
//! use axum::{routing::get, Router};
//! use std::time::Duration;
//! use tower_ratelimit::fair::FairQueueLayer;
//! use tower_ratelimit::key::PeerIp;
//!
//! // At most 4 at once, fair-queued by client IP: 8 waiting per client,
//! // 64 in all, none longer than 10 s.
//! let reports = FairQueueLayer::builder(PeerIp::new())
//!     .concurrency(4)
//!     .max_per_key(8)
//!     .max_total(64)
//!     .max_wait(Duration::from_secs(10))
//!     .build()
//!     .unwrap();
//! let app: Router = Router::new().route("/reports", get(|| async { "report" }).layer(reports));
//! ```
//!
//! # Observability
//!
//! `debug` events when a request is refused (`reason`: `key_full`,
//! `queue_full`, `timeout`) and when the adaptive limit changes. With the
//! `metrics` feature: the counter `ratelimit_fair_queue_rejected_total`
//! (labels `queue`, `reason`) and the gauge `ratelimit_adaptive_limit`
//! (label `limit`).

mod adaptive;
mod queue;
mod service;

pub use adaptive::{AdaptiveLimit, AdaptiveLimitBuilder, Capacity};
pub use service::{FairFuture, FairQueue};

use crate::key::{Global, KeyExtractor};
use crate::policy::Cost;
use crate::response::ProblemJson;
use queue::State;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tower_layer::Layer;

/// What is wrong with a fair queue's or an adaptive limit's settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FairConfigError {
    /// The adaptive limit's minimum is 0: it could stop admitting for good.
    ZeroMinimum,
    /// The adaptive limit's maximum is below its minimum.
    MaxBelowMin {
        /// The minimum.
        min: usize,
        /// The maximum.
        max: usize,
    },
    /// The latency target is zero.
    ZeroTarget,
    /// The backoff ratio is not strictly between 0 and 1.
    Backoff(f64),
    /// The fair queue's concurrency is 0: nothing would ever run.
    ZeroConcurrency,
    /// The per-key queue bound exceeds the total one.
    PerKeyAboveTotal {
        /// The per-key bound.
        per_key: usize,
        /// The total bound.
        total: usize,
    },
    /// The DRR quantum is 0.
    ZeroQuantum,
}

impl fmt::Display for FairConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroMinimum => f.write_str("the adaptive limit's minimum must be at least 1"),
            Self::MaxBelowMin { min, max } => {
                write!(
                    f,
                    "the adaptive limit's maximum {max} is below its minimum {min}"
                )
            }
            Self::ZeroTarget => f.write_str("the latency target must be positive"),
            Self::Backoff(r) => write!(f, "backoff ratio {r} is not strictly between 0 and 1"),
            Self::ZeroConcurrency => f.write_str("the fair queue's concurrency must be at least 1"),
            Self::PerKeyAboveTotal { per_key, total } => write!(
                f,
                "{per_key} waiting per key exceeds the {total} waiting in all"
            ),
            Self::ZeroQuantum => f.write_str("the round-robin quantum must be at least 1"),
        }
    }
}

impl std::error::Error for FairConfigError {}

/// State shared by every clone of a fair queue's layer and services.
pub(crate) struct Shared<X: KeyExtractor, R> {
    key: X,
    cost: Option<Box<dyn Cost>>,
    response: R,
    capacity: Capacity,
    state: Mutex<State<X::Key>>,
    max_wait: Duration,
    max_per_key: usize,
    name: &'static str,
    /// Moving average of the inner service's latency, in nanoseconds.
    service: AtomicU64,
    /// Whether a request without a peer address has been logged.
    no_peer_logged: AtomicBool,
}

impl<X: KeyExtractor, R> Shared<X, R> {
    fn lock(&self) -> MutexGuard<'_, State<X::Key>> {
        // The state is consistent between statements: a panic elsewhere
        // leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds a latency into the moving average (weight 1/8).
    fn record(&self, latency: Duration) {
        let sample = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        let old = self.service.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.service.store(new, Ordering::Relaxed);
    }

    fn service_nanos(&self) -> u64 {
        self.service.load(Ordering::Relaxed)
    }
}

/// A layer that fair-queues requests per key in front of a concurrency
/// limit; see [the module](self).
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
    /// 1..=64 quanta, so a cost of 0 counts as 1): a key is served about `quantum` cost units per
    /// turn.
    pub fn cost(mut self, cost: impl Cost) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// Like [`cost`](Self::cost), with a closure of the request head; no
    /// type annotations needed.
    ///
    /// ```
    /// use tower_ratelimit::{fair::FairQueueLayer, key::PeerIp};
    ///
    /// // An export takes ten turns' worth of the queue.
    /// let layer = FairQueueLayer::builder(PeerIp::new())
    ///     .cost_fn(|req| if req.uri.path().starts_with("/export") { 10 } else { 1 })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn cost_fn<F>(self, cost: F) -> Self
    where
        F: Fn(&http::request::Parts) -> u64 + Send + Sync + 'static,
    {
        self.cost(cost)
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
    /// [`ProblemJson`].
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

    /// Answers refused requests with a closure of the
    /// [`Rejection`](crate::response::Rejection); no
    /// type annotations needed.
    ///
    /// ```
    /// use axum::body::Body;
    /// use tower_ratelimit::{fair::FairQueueLayer, key::PeerIp};
    ///
    /// let layer = FairQueueLayer::builder(PeerIp::new())
    ///     .response_fn(|_rejection| {
    ///         http::Response::builder().status(503).body(Body::from("busy")).unwrap()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn response_fn<F, B>(self, response: F) -> FairQueueBuilder<X, F>
    where
        F: Fn(crate::response::Rejection<'_>) -> http::Response<B> + Send + Sync + 'static,
    {
        self.response(response)
    }

    /// The layer, or what is wrong with its settings.
    pub fn build(self) -> Result<FairQueueLayer<X, R>, FairConfigError> {
        if let Capacity::Fixed(0) = self.capacity {
            return Err(FairConfigError::ZeroConcurrency);
        }
        if self.max_per_key > self.max_total {
            return Err(FairConfigError::PerKeyAboveTotal {
                per_key: self.max_per_key,
                total: self.max_total,
            });
        }
        if self.quantum == 0 {
            return Err(FairConfigError::ZeroQuantum);
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

#[cfg(all(test, feature = "metrics"))]
mod metrics_tests {
    use super::*;
    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };
    use std::collections::BTreeMap;
    use tower_service::Service;

    type Values = Arc<Mutex<BTreeMap<String, f64>>>;

    /// Keeps each counter's total and each gauge's last value, by
    /// `name{labels}`.
    #[derive(Default)]
    struct Rec(Values);

    struct One(String, Values);

    impl CounterFn for One {
        fn increment(&self, v: u64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() += v as f64;
        }
        fn absolute(&self, v: u64) {
            self.1.lock().unwrap().insert(self.0.clone(), v as f64);
        }
    }

    impl GaugeFn for One {
        fn increment(&self, v: f64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() += v;
        }
        fn decrement(&self, v: f64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() -= v;
        }
        fn set(&self, v: f64) {
            self.1.lock().unwrap().insert(self.0.clone(), v);
        }
    }

    fn name(key: &Key) -> String {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    impl Recorder for Rec {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(Arc::new(One(name(key), self.0.clone())))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(Arc::new(One(name(key), self.0.clone())))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn the_limit_is_a_gauge_and_refusals_are_counted() {
        let rec = Rec::default();
        let values = rec.0.clone();
        metrics::with_local_recorder(&rec, || {
            let limit = AdaptiveLimit::builder(Duration::from_millis(10))
                .name("api")
                .initial(10)
                .build()
                .unwrap();
            let now = tokio::time::Instant::now();
            limit.sample(now, Duration::from_millis(20), 10);
            assert_eq!(
                values.lock().unwrap()["ratelimit_adaptive_limit{limit=api}"],
                9.0
            );

            let inner = tower::service_fn(|_: http::Request<()>| {
                std::future::pending::<Result<http::Response<bytes::Bytes>, ()>>()
            });
            let mut svc = FairQueueLayer::builder(Global)
                .concurrency(1)
                .max_per_key(0)
                .max_total(0)
                .name("q")
                .build()
                .unwrap()
                .layer(inner);
            let _running = svc.call(http::Request::new(()));
            let _refused = svc.call(http::Request::new(()));
            assert_eq!(
                values.lock().unwrap()
                    ["ratelimit_fair_queue_rejected_total{queue=q,reason=queue_full}"],
                1.0
            );
        });
    }
}
