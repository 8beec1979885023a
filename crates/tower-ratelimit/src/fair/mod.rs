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
//!
//! [`KeyExtractor`]: crate::key::KeyExtractor
//! [`Cost`]: crate::strategy::Cost

mod adaptive;
mod error;
mod layer;
mod queue;
mod service;
mod shared;

pub use adaptive::{AdaptiveLimit, AdaptiveLimitBuilder, Capacity};
pub use error::FairQueueBuildError;
pub use layer::{FairQueueBuilder, FairQueueLayer};
pub use service::{FairFuture, FairQueue};

pub(crate) use shared::Shared;

#[cfg(all(test, feature = "metrics"))]
mod metrics_tests {
    use super::*;
    use crate::key::Global;
    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tower_layer::Layer;
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
