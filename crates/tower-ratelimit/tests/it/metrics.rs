//! The `metrics` counters (feature `metrics`): allowed, limited, dry-run,
//! key errors and malformed settled costs, each labelled, counted through a recorder of the test's
//! own.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::Request;
use axum::routing::get;
use axum::Router;
use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use ratelimit_core::{Gcra, MemoryStore};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::Service;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::strategy::Mode;
use tower_ratelimit::RateLimitLayer;

pub type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

/// Counts increments by `name{label=value,...}`.
#[derive(Default)]
pub struct Counting(pub Counts);

struct One(String, Counts);

impl CounterFn for One {
    fn increment(&self, value: u64) {
        *self.1.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }

    fn absolute(&self, value: u64) {
        self.1.lock().unwrap().insert(self.0.clone(), value);
    }
}

impl Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        Counter::from_arc(Arc::new(One(name, self.0.clone())))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Sends `req` through `app`: with the in-memory store the layer answers
/// (or calls the handler) without waiting, so one poll is enough.
pub fn send(app: &mut Router, req: Request<Body>) -> u16 {
    let mut fut = pin!(app.call(req));
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(res)) => res.status().as_u16(),
        _ => panic!("the in-memory path should answer at once"),
    }
}

#[test]
fn counters_are_labelled_and_exact() {
    let recorder = Counting::default();
    let counts = recorder.0.clone();
    let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(60)).unwrap());
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("api", store)
        .build()
        .unwrap();
    let mut limited = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(layer)
        .layer(MockConnectInfo(SocketAddr::from(([192, 0, 2, 1], 1))));
    let dry = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "trial",
            MemoryStore::new(Gcra::new(1, Duration::from_secs(60)).unwrap()),
        )
        .mode(Mode::DryRun)
        .build()
        .unwrap();
    let mut dry = Router::new().route("/", get(|| async { "hi" })).layer(dry);
    let get = || Request::get("/").body(Body::empty()).unwrap();

    metrics::with_local_recorder(&recorder, || {
        let codes: Vec<u16> = (0..3).map(|_| send(&mut limited, get())).collect();
        assert_eq!(codes, [200, 200, 429]);
        // No ConnectInfo: no key, a 4xx.
        assert_eq!(send(&mut dry, get()) / 100, 4);
        let mut with_peer = get();
        with_peer
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(SocketAddr::from((
                [192, 0, 2, 2],
                1,
            ))));
        assert_eq!(send(&mut dry, with_peer), 200);
        let mut again = get();
        again
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(SocketAddr::from((
                [192, 0, 2, 2],
                1,
            ))));
        assert_eq!(send(&mut dry, again), 200, "dry run never rejects");
    });

    let counts = counts.lock().unwrap();
    assert_eq!(counts.get("ratelimit_allowed_total{limit=api}"), Some(&2));
    assert_eq!(counts.get("ratelimit_limited_total{limit=api}"), Some(&1));
    assert_eq!(counts.get("ratelimit_allowed_total{limit=trial}"), Some(&1));
    assert_eq!(counts.get("ratelimit_dry_run_total{limit=trial}"), Some(&1));
    let key_errors: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("ratelimit_key_errors_total{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(key_errors, 1, "{counts:?}");
}

/// A ban's refusals are counted as limited and as banned.
#[test]
fn bans_are_counted() {
    let recorder = Counting::default();
    let counts = recorder.0.clone();
    let ban = ratelimit_core::BanPolicy::new(Duration::from_secs(3600)).unwrap();
    let store = MemoryStore::builder(Gcra::new(1, Duration::from_secs(60)).unwrap())
        .ban(Some(ban))
        .build()
        .unwrap();
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("login", store)
        .build()
        .unwrap();
    let mut app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(layer)
        .layer(MockConnectInfo(SocketAddr::from(([192, 0, 2, 1], 1))));
    metrics::with_local_recorder(&recorder, || {
        let codes: Vec<u16> = (0..3)
            .map(|_| send(&mut app, Request::get("/").body(Body::empty()).unwrap()))
            .collect();
        assert_eq!(codes, [200, 429, 429]);
    });
    let counts = counts.lock().unwrap();
    assert_eq!(counts.get("ratelimit_limited_total{limit=login}"), Some(&2));
    assert_eq!(
        counts.get("ratelimit_banned_total{limit=login}"),
        Some(&2),
        "{counts:?}"
    );
}

/// A settled cost that is not a decimal is counted (and settles to at
/// least the reservation).
#[test]
fn malformed_costs_are_counted() {
    let recorder = Counting::default();
    let counts = recorder.0.clone();
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "tokens",
            MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()),
        )
        .settle("response-header:x-tokens-used".parse().unwrap())
        .build()
        .unwrap();
    let mut app = Router::new()
        .route("/", get(|| async { [("x-tokens-used", "-5")] }))
        .layer(layer)
        .layer(MockConnectInfo(SocketAddr::from(([192, 0, 2, 1], 1))));
    metrics::with_local_recorder(&recorder, || {
        let req = Request::get("/").body(Body::empty()).unwrap();
        assert_eq!(send(&mut app, req), 200);
    });
    let counts = counts.lock().unwrap();
    assert_eq!(
        counts.get("ratelimit_malformed_costs_total{limit=tokens}"),
        Some(&1),
        "{counts:?}"
    );
}
