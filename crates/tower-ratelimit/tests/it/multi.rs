//! Several limits on one route, per-request costs and per-request limit selection.

use crate::common::*;
use axum::extract::Extension;
use axum::routing::get;
use axum::Router;
use http::request::Parts;
use ratelimit_core::{AnyAlgorithm, FixedWindow, Gcra, ManualClock, MemoryStore, Store};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{Global, GlobalKey, Header, HeaderKey, PeerIp};
use tower_ratelimit::response::{RATELIMIT, RATELIMIT_POLICY};
use tower_ratelimit::strategy::Selection;
use tower_ratelimit::{RateLimitInfo, RateLimitLayer};

#[tokio::test]
async fn all_must_admit_and_denials_consume_nothing() {
    let clock = ManualClock::new();
    let per_second = Arc::new(MemoryStore::new(AnyAlgorithm::from(
        Gcra::new(3, SEC).unwrap(),
    )));
    let per_minute = Arc::new(MemoryStore::new(AnyAlgorithm::from(
        FixedWindow::new(5, 60 * SEC).unwrap(),
    )));
    let layer =
        RateLimitLayer::<_, MemoryStore<AnyAlgorithm, tower_ratelimit::key::IpKey>>::builder(
            PeerIp::new(),
        )
        .limit("per-second", per_second.clone())
        .limit("per-minute", per_minute.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/",
            get(|Extension(info): Extension<RateLimitInfo>| async move {
                info.decisions().len().to_string()
            }),
        )
        .layer(layer);
    let send = || app.clone().oneshot(get_from("10.1.1.1:1", "/", &[]));
    let res = send().await.unwrap();
    assert_eq!(
        res.headers()[RATELIMIT_POLICY],
        "\"per-second\";q=3;w=1, \"per-minute\";q=5;w=60"
    );
    assert_eq!(
        res.headers()[RATELIMIT],
        "\"per-second\";r=2;t=1, \"per-minute\";r=4;t=60"
    );
    assert_eq!(body_string(res).await, "2");
    send().await.unwrap();
    send().await.unwrap();
    // The per-second limit denies: the per-minute one was not consumed.
    let res = send().await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()[RATELIMIT_POLICY], "\"per-second\";q=3;w=1");
    let key = tower_ratelimit::key::IpKey::V4 {
        net: "10.1.1.1".parse().unwrap(),
        prefix: 32,
    };
    assert_eq!(
        per_minute
            .check(&key, 0, clock.now_nanos())
            .value()
            .unwrap()
            .remaining,
        2
    );
    clock.advance(SEC);
    send().await.unwrap();
    send().await.unwrap();
    // Now the per-minute limit denies; the per-second one is refunded.
    let res = send().await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()[RATELIMIT_POLICY], "\"per-minute\";q=5;w=60");
    assert_eq!(res.headers()["retry-after"], "59");
    assert_eq!(
        per_second
            .check(&key, 0, clock.now_nanos())
            .value()
            .unwrap()
            .remaining,
        1
    );
}

trait NowNanos {
    fn now_nanos(&self) -> u64;
}
impl NowNanos for ManualClock {
    fn now_nanos(&self) -> u64 {
        ratelimit_core::Clock::now(self)
    }
}

#[tokio::test]
async fn cost_and_selection_per_request() {
    // Limit 0: free plan, 10 units/min; limit 1: pro plan, 100 units/min.
    // The plan comes from the key's prefix; the cost from `X-Units`.
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder("x-user".parse::<Header>().unwrap())
        .limit("free", MemoryStore::new(Gcra::new(10, 60 * SEC).unwrap()))
        .limit("pro", MemoryStore::new(Gcra::new(100, 60 * SEC).unwrap()))
        .select(|_: &Parts, key: &HeaderKey| {
            if key.stored().starts_with("pro-") {
                Selection::only(1)
            } else {
                Selection::only(0)
            }
        })
        .cost(|req: &Parts| {
            req.headers
                .get("x-units")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1u64)
        })
        .clock(clock)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let send = |user: &'static str, units: &'static str| {
        app.clone().oneshot(get_from(
            "10.0.0.1:1",
            "/",
            &[("x-user", user.as_bytes()), ("x-units", units.as_bytes())],
        ))
    };
    assert_eq!(send("alice", "8").await.unwrap().status(), 200);
    let res = send("alice", "3").await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()[RATELIMIT], "\"free\";r=2;t=6");
    assert_eq!(send("alice", "2").await.unwrap().status(), 200);
    let res = send("pro-bob", "50").await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()[RATELIMIT], "\"pro\";r=50;t=30");
    assert_eq!(send("pro-bob", "50").await.unwrap().status(), 200);
    assert_eq!(send("pro-bob", "1").await.unwrap().status(), 429);
    let _ = Duration::ZERO;
}

#[tokio::test]
async fn empty_selection_passes_through() {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("l", MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()))
        .select(|req: &Parts, _: &tower_ratelimit::key::IpKey| {
            if req.uri.path() == "/free" {
                Selection::NONE
            } else {
                Selection::ALL
            }
        })
        .build()
        .unwrap();
    let app = Router::new()
        .route("/free", get(|| async { "ok" }))
        .route("/paid", get(|| async { "ok" }))
        .layer(layer);
    for _ in 0..3 {
        let res = app
            .clone()
            .oneshot(get_from("10.0.0.1:1", "/free", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers().get(RATELIMIT).is_none());
    }
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/paid", &[]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/paid", &[]))
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
}

/// A selector choosing a limit the layer does not have (index 1 of one
/// limit, or past 64) never lets a request go unlimited: every limit
/// checks it, and the bug is logged once.
#[tokio::test]
async fn a_selection_of_a_missing_limit_checks_every_limit() {
    let (logs, _guard) = capture(tracing::Level::ERROR);
    for index in [1, 64] {
        let layer = RateLimitLayer::builder(PeerIp::new())
            .limit("l", MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()))
            .select(move |_: &Parts, _: &tower_ratelimit::key::IpKey| Selection::only(index))
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        let send = || app.clone().oneshot(get_from("10.0.0.1:1", "/", &[]));
        assert_eq!(send().await.unwrap().status(), 200);
        assert_eq!(send().await.unwrap().status(), 429, "index {index}");
        assert_eq!(send().await.unwrap().status(), 429, "index {index}");
    }
    let text = logs.text();
    assert_eq!(
        text.matches("past the layer's 1 limits").count(),
        2,
        "{text}"
    );
}

#[tokio::test]
async fn outer_layer_refunds_when_an_inner_layer_limits() {
    use tower_ratelimit::key::{Global, IpKey};
    let clock = ManualClock::new();
    let per_ip_store = Arc::new(MemoryStore::new(Gcra::new(5, 60 * SEC).unwrap()));
    let per_ip = RateLimitLayer::<_, MemoryStore<Gcra, IpKey>>::builder(PeerIp::new())
        .limit("per-ip", per_ip_store.clone())
        .refund_on_inner_limit()
        .clock(clock.clone())
        .build()
        .unwrap();
    let global = RateLimitLayer::builder(Global)
        .limit("global", MemoryStore::new(Gcra::new(2, 60 * SEC).unwrap()))
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(global)
        .layer(per_ip);
    let send = || app.clone().oneshot(get_from("10.2.2.2:1", "/", &[]));
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(send().await.unwrap().status(), 200);
    for _ in 0..4 {
        let res = send().await.unwrap();
        assert_eq!(res.status(), 429);
        assert!(res.extensions().get::<tower_ratelimit::Limited>().is_some());
    }
    // Only the two admitted requests used the per-IP limit.
    let key = IpKey::V4 {
        net: "10.2.2.2".parse().unwrap(),
        prefix: 32,
    };
    assert_eq!(
        per_ip_store
            .check(&key, 0, clock.now_nanos())
            .value()
            .unwrap()
            .remaining,
        3
    );
}

/// A store whose futures are pending once (as a remote store's are), over a
/// memory store, and which does not answer at once.
struct Slow(MemoryStore<Gcra, GlobalKey>);

/// Ready on the second poll, waking the task on the first.
struct Later<T>(Option<T>, bool);

impl<T: Unpin> std::future::Future for Later<T> {
    type Output = T;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<T> {
        if !self.1 {
            self.1 = true;
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        std::task::Poll::Ready(self.0.take().expect("polled once more"))
    }
}

impl ratelimit_core::Store<GlobalKey> for Slow {
    type CheckFuture = Later<Result<ratelimit_core::Decision, ratelimit_core::StoreError>>;
    type WriteFuture = Later<Result<(), ratelimit_core::StoreError>>;

    fn check(
        &self,
        key: &GlobalKey,
        cost: u64,
        now: u64,
    ) -> ratelimit_core::Answer<
        Result<ratelimit_core::Decision, ratelimit_core::StoreError>,
        Self::CheckFuture,
    > {
        ratelimit_core::Answer::pending(Later(Some(self.0.check(key, cost, now).value()), false))
    }

    fn refund(
        &self,
        key: &GlobalKey,
        cost: u64,
        at: u64,
        now: u64,
    ) -> ratelimit_core::Answer<Result<(), ratelimit_core::StoreError>, Self::WriteFuture> {
        self.0.refund(key, cost, at, now).value().unwrap();
        ratelimit_core::Answer::pending(Later(Some(Ok(())), false))
    }
}

impl ratelimit_core::store::Upkeep for Slow {}

#[tokio::test]
async fn one_layer_mixes_stores_through_box_store() {
    use ratelimit_core::BoxStore;
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(Global)
        .limit(
            "memory",
            BoxStore::new(MemoryStore::<_, GlobalKey>::new(Gcra::new(3, SEC).unwrap())),
        )
        .limit(
            "slow",
            BoxStore::new(Slow(MemoryStore::new(Gcra::new(2, SEC).unwrap()))),
        )
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let send = || app.clone().oneshot(get_from("10.1.1.1:1", "/", &[]));
    let res = send().await.unwrap();
    assert_eq!(
        res.headers()[RATELIMIT],
        "\"memory\";r=2;t=1, \"slow\";r=1;t=1"
    );
    send().await.unwrap();
    // The slow store denies; the memory store's unit is given back.
    let res = send().await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()[RATELIMIT], "\"slow\";r=0;t=1");
    clock.advance(SEC / 2);
    let res = send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()[RATELIMIT],
        "\"memory\";r=1;t=1, \"slow\";r=0;t=1"
    );
}
