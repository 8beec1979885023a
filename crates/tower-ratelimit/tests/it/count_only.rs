//! Counting only failed responses, exactly, under concurrency.

use crate::common::*;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{ManualClock, MemoryStore, SlidingLog};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::strategy::StatusIs;
use tower_ratelimit::RateLimitLayer;

fn login_app(hits: Hits, clock: &ManualClock) -> Router {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "failures",
            MemoryStore::new(SlidingLog::new(5, Duration::from_secs(3600)).unwrap()),
        )
        .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
        .clock(clock.clone())
        .build()
        .unwrap();
    Router::new()
        .route(
            "/login",
            get(move |req: axum::extract::Request| {
                let hits = hits.clone();
                async move {
                    hits.hit();
                    // Make concurrent attempts overlap in the handler.
                    tokio::task::yield_now().await;
                    if req
                        .headers()
                        .get("x-password")
                        .is_some_and(|p| p == "open sesame")
                    {
                        StatusCode::OK
                    } else {
                        StatusCode::UNAUTHORIZED
                    }
                }
            }),
        )
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_wrong_passwords_five_reach_the_check() {
    let hits = Hits::default();
    let clock = ManualClock::new();
    let app = login_app(hits.clone(), &clock);
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let req = get_from("192.0.2.50:1", "/login", &[("x-password", b"guess")]);
            app.oneshot(req).await.unwrap().status().as_u16()
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(hits.get(), 5);
    assert_eq!(codes.iter().filter(|&&c| c == 401).count(), 5);
    assert_eq!(codes.iter().filter(|&&c| c == 429).count(), 45);
    // Used up: even the right password gets 429 for the hour.
    let req = get_from("192.0.2.50:1", "/login", &[("x-password", b"open sesame")]);
    assert_eq!(app.clone().oneshot(req).await.unwrap().status(), 429);
    clock.advance(Duration::from_secs(3600));
    let req = get_from("192.0.2.50:1", "/login", &[("x-password", b"open sesame")]);
    assert_eq!(app.oneshot(req).await.unwrap().status(), 200);
}

#[tokio::test]
async fn successes_do_not_count() {
    let hits = Hits::default();
    let clock = ManualClock::new();
    let app = login_app(hits.clone(), &clock);
    for _ in 0..20 {
        let req = get_from("192.0.2.51:1", "/login", &[("x-password", b"open sesame")]);
        assert_eq!(app.clone().oneshot(req).await.unwrap().status(), 200);
    }
    for _ in 0..5 {
        let req = get_from("192.0.2.51:1", "/login", &[]);
        assert_eq!(app.clone().oneshot(req).await.unwrap().status(), 401);
    }
    let req = get_from("192.0.2.51:1", "/login", &[]);
    assert_eq!(app.clone().oneshot(req).await.unwrap().status(), 429);
    assert_eq!(hits.get(), 25);
}

#[tokio::test]
async fn fields_show_what_counted() {
    // A response that does not count gets its slot back, and its fields
    // say so; one that counts shows the slot used.
    let clock = ManualClock::new();
    let app = login_app(Hits::default(), &clock);
    let send = |password: &'static [u8]| {
        let app = app.clone();
        async move {
            let req = get_from("192.0.2.52:1", "/login", &[("x-password", password)]);
            let res = app.oneshot(req).await.unwrap();
            let field = |n: &str| res.headers()[n].to_str().unwrap().to_owned();
            (res.status(), field("ratelimit"), field("ratelimit-policy"))
        }
    };
    let ok = (StatusCode::OK, r#""failures";r=5;t=0"#.to_owned());
    let (status, state, policy) = send(b"open sesame").await;
    assert_eq!((status, state), ok);
    assert_eq!(policy, r#""failures";q=5;w=3600"#);
    let (status, state, _) = send(b"guess").await;
    assert_eq!(
        (status, state.as_str()),
        (StatusCode::UNAUTHORIZED, r#""failures";r=4;t=3600"#)
    );
    clock.advance(Duration::from_secs(600));
    let (status, state, _) = send(b"open sesame").await;
    assert_eq!(
        (status, state.as_str()),
        (StatusCode::OK, r#""failures";r=4;t=3000"#)
    );
}
