//! Concurrent requests through cloned services admit exactly the limit.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{
    AnyAlgorithm, FixedWindow, Gcra, ManualClock, MemoryStore, SlidingLog, Store,
};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{Global, PeerIp};
use tower_ratelimit::RateLimitLayer;

async fn hammer(app: Router, n: usize, peer: &'static str) -> (usize, usize) {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            app.oneshot(get_from(peer, "/", &[]))
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let (mut ok, mut limited) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            200 => ok += 1,
            429 => limited += 1,
            s => panic!("unexpected status {s}"),
        }
    }
    (ok, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_concurrent_requests_admit_exactly_the_limit() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "l",
            MemoryStore::new(Gcra::new(10, Duration::from_secs(3600)).unwrap()),
        )
        .clock(clock)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    assert_eq!(hammer(app, 100, "198.51.100.1:1").await, (10, 90));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_limits_under_concurrency_are_exact() {
    // 100 requests, limits 30 and 7: exactly 7 admitted, and the first
    // limit has consumed exactly 7 (nothing leaked by refunds).
    let clock = ManualClock::new();
    let minute = Duration::from_secs(60);
    let wide: AnyAlgorithm = SlidingLog::new(30, minute).unwrap().into();
    let narrow: AnyAlgorithm = FixedWindow::new(7, minute).unwrap().into();
    let first = std::sync::Arc::new(MemoryStore::new(wide));
    let layer = RateLimitLayer::builder(Global)
        .limit("wide", first.clone())
        .limit("narrow", MemoryStore::new(narrow))
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    assert_eq!(hammer(app, 100, "198.51.100.1:1").await, (7, 93));
    let peek = first
        .check(&tower_ratelimit::key::GlobalKey, 0, 0)
        .value()
        .unwrap();
    assert_eq!(peek.remaining, 23);
}
