//! Shaping with the leaky bucket: held, then passed on; dropped requests give their slot back.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use ratelimit_core::TokioClock;
use ratelimit_core::{LeakyBucket, MemoryStore};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;
use tower_ratelimit::key::Global;
use tower_ratelimit::strategy::Mode;
use tower_ratelimit::RateLimitLayer;

fn shaped(queue: u64, log: Arc<Mutex<Vec<Duration>>>, start: Instant) -> Router {
    // 10 per second: one departure every 100 ms.
    let layer = RateLimitLayer::builder(Global)
        .limit(
            "pace",
            MemoryStore::new(LeakyBucket::new(10, SEC, queue).unwrap()),
        )
        .mode(Mode::Shape)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    Router::new()
        .route(
            "/",
            get(move || {
                let log = log.clone();
                async move {
                    log.lock().unwrap().push(start.elapsed());
                    "ok"
                }
            }),
        )
        .layer(layer)
}

#[tokio::test(start_paused = true)]
async fn held_requests_leave_at_a_steady_rate() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let app = shaped(5, log.clone(), start);
    let mut tasks = Vec::new();
    for _ in 0..7 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            app.oneshot(get_from("10.0.0.1:1", "/", &[]))
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
        tokio::task::yield_now().await;
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    codes.sort();
    assert_eq!(codes, [200, 200, 200, 200, 200, 200, 429]);
    let mut times = log.lock().unwrap().clone();
    times.sort();
    let ms: Vec<u128> = times.iter().map(|d| d.as_millis()).collect();
    assert_eq!(ms, [0, 100, 200, 300, 400, 500]);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_held_request_gives_its_slot_back() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let app = shaped(1, log.clone(), start);
    // A leaves at once; B is held 100 ms and fills the queue.
    let a = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    assert_eq!(a.status(), 200);
    let b = app.clone().oneshot(get_from("10.0.0.1:1", "/", &[]));
    let b = tokio::time::timeout(Duration::from_millis(10), b).await;
    assert!(b.is_err(), "B is still held, then dropped");
    // B's slot is free again: C is admitted (held until 100 ms).
    let c = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    assert_eq!(c.status(), 200);
    let ms: Vec<u128> = log.lock().unwrap().iter().map(|d| d.as_millis()).collect();
    assert_eq!(ms, [0, 100]);
}

/// Shaping needs a leaky bucket: a layer shaping a limit of another
/// algorithm (which never holds a request, so shaping would only enforce)
/// is refused at build, naming the limit and the algorithm.
#[test]
fn shaping_without_a_leaky_bucket_is_refused_at_build() {
    use ratelimit_core::{AnyAlgorithm, Gcra};
    let layer = |algorithm: AnyAlgorithm| {
        RateLimitLayer::builder(Global)
            .limit("steady", MemoryStore::new(algorithm))
            .mode(Mode::Shape)
            .build()
    };
    let gcra = Gcra::new(5, Duration::from_secs(1)).unwrap().into();
    let err = layer(gcra).err().unwrap().to_string();
    assert!(err.contains("\"steady\"") && err.contains("gcra"), "{err}");
    let bucket = LeakyBucket::new(5, Duration::from_secs(1), 2)
        .unwrap()
        .into();
    assert!(layer(bucket).is_ok());
}
