//! Store failures: fail open or closed; remote-style stores with pending futures.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use ratelimit_core::store::Upkeep;
use ratelimit_core::{Answer, Decision, Gcra, ManualClock, MemoryStore, Store, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::key::{Global, GlobalKey};
use tower_ratelimit::response::RATELIMIT;
use tower_ratelimit::strategy::FailurePolicy;
use tower_ratelimit::RateLimitLayer;

type BoxFut<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// A remote-like store: answers after yielding, from an inner memory store,
/// or fails while `down` is set.
struct Remote {
    inner: Arc<MemoryStore<Gcra, GlobalKey>>,
    down: Arc<AtomicBool>,
}

impl Store<GlobalKey> for Remote {
    type CheckFuture = BoxFut<Decision>;
    type WriteFuture = BoxFut<()>;

    fn check(
        &self,
        key: &GlobalKey,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        let (inner, down, key) = (self.inner.clone(), self.down.clone(), *key);
        Answer::pending(Box::pin(async move {
            tokio::task::yield_now().await;
            if down.load(Ordering::SeqCst) {
                return Err(StoreError::unavailable(
                    "io",
                    std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
                ));
            }
            inner.check(&key, cost, now).value()
        }))
    }

    fn refund(
        &self,
        key: &GlobalKey,
        cost: u64,
        at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let (inner, key) = (self.inner.clone(), *key);
        Answer::pending(Box::pin(async move {
            tokio::task::yield_now().await;
            inner.refund(&key, cost, at, now).value().unwrap();
            Ok(())
        }))
    }
}

impl Upkeep for Remote {}

fn app(policy: FailurePolicy, down: Arc<AtomicBool>, limit: u64) -> Router {
    let store = Remote {
        inner: Arc::new(MemoryStore::new(Gcra::new(limit, 60 * SEC).unwrap())),
        down,
    };
    let layer = RateLimitLayer::builder(Global)
        .limit("remote", store)
        .on_store_error(policy)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn code(app: &Router) -> (u16, String, bool) {
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    let has = res.headers().contains_key(RATELIMIT);
    let s = res.status().as_u16();
    (s, body_string(res).await, has)
}

#[tokio::test]
async fn remote_store_limits_like_memory() {
    let app = app(FailurePolicy::Open, Arc::default(), 2);
    assert_eq!(code(&app).await.0, 200);
    assert_eq!(code(&app).await.0, 200);
    assert_eq!(code(&app).await.0, 429);
}

#[tokio::test]
async fn fail_open_admits() {
    let down = Arc::new(AtomicBool::new(true));
    let app = app(FailurePolicy::Open, down.clone(), 1);
    for _ in 0..5 {
        let (s, body, has_headers) = code(&app).await;
        assert_eq!((s, body.as_str(), has_headers), (200, "ok", false));
    }
    down.store(false, Ordering::SeqCst);
    assert_eq!(code(&app).await.0, 200);
    assert_eq!(code(&app).await.0, 429);
}

#[tokio::test]
async fn fail_closed_is_503_problem_json() {
    let down = Arc::new(AtomicBool::new(true));
    let app = app(FailurePolicy::Closed, down.clone(), 1);
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
    assert_eq!(body["status"], 503);
    assert!(body["detail"].as_str().unwrap().contains("unavailable"));
    down.store(false, Ordering::SeqCst);
    assert_eq!(code(&app).await.0, 200);
}

#[tokio::test]
async fn capped_memory_store_refusing_new_keys_refuses_under_either_policy() {
    use tower_ratelimit::key::PeerIp;
    // Failing open would admit every new key at the cap, unlimited.
    for (policy, expected) in [(FailurePolicy::Open, 503), (FailurePolicy::Closed, 503)] {
        let store = MemoryStore::<Gcra, tower_ratelimit::key::IpKey>::builder(
            Gcra::new(1, 60 * SEC).unwrap(),
        )
        .shards(1)
        .max_keys(Some(1))
        .at_capacity(ratelimit_core::store::AtCapacity::Refuse)
        .build()
        .unwrap();
        let layer = RateLimitLayer::builder(PeerIp::new())
            .limit("capped", store)
            .on_store_error(policy)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        let res = app
            .clone()
            .oneshot(get_from("10.0.0.1:1", "/", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let res = app
            .clone()
            .oneshot(get_from("10.0.0.2:1", "/", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), expected);
        // Known keys stay limited exactly.
        let res = app
            .clone()
            .oneshot(get_from("10.0.0.1:1", "/", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
    }
}

#[tokio::test]
async fn remote_store_with_several_limits_refunds() {
    let first = Arc::new(MemoryStore::new(Gcra::new(10, 60 * SEC).unwrap()));
    let remote = |inner: Arc<MemoryStore<Gcra, GlobalKey>>| Remote {
        inner,
        down: Arc::default(),
    };
    let layer = RateLimitLayer::builder(Global)
        .limit("wide", remote(first.clone()))
        .limit(
            "narrow",
            remote(Arc::new(MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()))),
        )
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    assert_eq!(code(&app).await.0, 200);
    assert_eq!(code(&app).await.0, 429);
    assert_eq!(code(&app).await.0, 429);
    assert_eq!(first.check(&GlobalKey, 0, 0).value().unwrap().remaining, 9);
}

/// A store that fails on every request is logged a few lines a minute,
/// not once per request.
#[tokio::test]
async fn store_failures_are_not_logged_per_request() {
    let (out, _guard) = capture_warnings();
    let down = Arc::new(AtomicBool::new(true));
    let app = app(FailurePolicy::Open, down, 1);
    for _ in 0..200 {
        assert_eq!(code(&app).await.0, 200);
    }
    let text = out.text();
    let lines = text.matches("rate-limit store failed").count();
    // One line at most (other tests of this binary share the process-wide
    // throttle and may have taken this interval's line).
    assert!(lines <= 1, "{lines} lines for 200 failures:\n{text}");
}
