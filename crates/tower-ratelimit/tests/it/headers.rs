//! Retry-After rounding and the syntax of the RateLimit fields.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{Algorithm, Gcra, ManualClock, MemoryStore, SlidingLog};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::Global;
use tower_ratelimit::response::{
    Headers, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    X_RATELIMIT_RESET,
};
use tower_ratelimit::RateLimitLayer;

fn app<A: Algorithm>(alg: A, clock: &ManualClock, headers: Headers) -> Router {
    let layer = RateLimitLayer::builder(Global)
        .limit("api", MemoryStore::new(alg))
        .clock(clock.clone())
        .headers(headers)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn send(app: &Router) -> axum::http::Response<axum::body::Body> {
    app.clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap()
}

#[tokio::test]
async fn retry_after_rounds_up_and_is_never_zero() {
    let clock = ManualClock::new();
    // 3 per second, burst 1: the next slot is 333.33 ms away.
    let app = app(Gcra::with_burst(3, SEC, 1).unwrap(), &clock, Headers::new());
    assert_eq!(send(&app).await.status(), 200);
    let res = send(&app).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    clock.advance(Duration::from_nanos(333_333_333));
    let res = send(&app).await;
    assert_eq!(res.status(), 429, "1 ns early");
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(res.headers()[RATELIMIT], "\"api\";r=0;t=1");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(send(&app).await.status(), 200);

    // 1 per 90 s: 89.5 s left rounds to 90.
    let clock = ManualClock::new();
    let app = self::app(Gcra::new(1, 90 * SEC).unwrap(), &clock, Headers::new());
    assert_eq!(send(&app).await.status(), 200);
    clock.advance(Duration::from_millis(500));
    let res = send(&app).await;
    assert_eq!(res.headers()["retry-after"], "90");
    clock.advance(Duration::from_millis(89_000));
    let res = send(&app).await;
    assert_eq!(res.headers()["retry-after"], "1");
    let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
    assert_eq!(body["retry_after"], 1);
}

/// Checks `"name";k=int;k=int` list syntax and returns the members.
fn members(value: &str, keys: [&str; 2]) -> Vec<(String, u64, u64)> {
    value
        .split(", ")
        .map(|m| {
            let rest = m.strip_prefix('"').expect("sf-string");
            let (name, params) = rest.split_once('"').expect("closing quote");
            let mut nums = Vec::new();
            for (i, p) in params.strip_prefix(';').unwrap().split(';').enumerate() {
                let (k, v) = p.split_once('=').unwrap();
                assert_eq!(k, keys[i], "{value}");
                nums.push(v.parse::<u64>().expect("integer"));
            }
            assert_eq!(nums.len(), 2, "{value}");
            (name.to_owned(), nums[0], nums[1])
        })
        .collect()
}

#[tokio::test]
async fn field_syntax_on_allowed_and_limited() {
    let clock = ManualClock::new();
    let app = app(
        SlidingLog::new(2, 60 * SEC).unwrap(),
        &clock,
        Headers::new().legacy(true),
    );
    let res = send(&app).await;
    let h = res.headers();
    assert_eq!(
        members(h[RATELIMIT_POLICY].to_str().unwrap(), ["q", "w"]),
        [("api".into(), 2, 60)]
    );
    assert_eq!(
        members(h[RATELIMIT].to_str().unwrap(), ["r", "t"]),
        [("api".into(), 1, 60)]
    );
    assert_eq!(h[X_RATELIMIT_LIMIT], "2");
    assert_eq!(h[X_RATELIMIT_REMAINING], "1");
    assert_eq!(h[X_RATELIMIT_RESET], "60");
    clock.advance(SEC / 2);
    send(&app).await;
    let res = send(&app).await;
    assert_eq!(res.status(), 429);
    let h = res.headers();
    assert_eq!(h["retry-after"], "60");
    assert_eq!(
        members(h[RATELIMIT].to_str().unwrap(), ["r", "t"]),
        [("api".into(), 0, 60)]
    );

    // Switched off on allowed responses, still on 429s.
    let app = self::app(
        Gcra::new(1, SEC).unwrap(),
        &clock,
        Headers::new().on_allowed(false),
    );
    let res = send(&app).await;
    assert!(res.headers().get(RATELIMIT).is_none());
    assert!(send(&app).await.headers().get(RATELIMIT).is_some());
}

#[tokio::test]
async fn a_cost_that_can_never_fit_gets_429_without_retry_after() {
    let layer = RateLimitLayer::builder(Global)
        .limit("small", MemoryStore::new(Gcra::new(5, SEC).unwrap()))
        .cost(|_: &http::request::Parts| 6)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let res = send(&app).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_none());
    let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
    assert!(body.get("retry_after").is_none());
    assert!(body["detail"].as_str().unwrap().contains("never"));
}
