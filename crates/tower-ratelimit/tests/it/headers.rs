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
        members(&h[RATELIMIT_POLICY]),
        [("api".into(), vec![("q".into(), 2), ("w".into(), 60)])]
    );
    assert_eq!(
        members(&h[RATELIMIT]),
        [("api".into(), vec![("r".into(), 1), ("t".into(), 60)])]
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
        members(&h[RATELIMIT]),
        [("api".into(), vec![("r".into(), 0), ("t".into(), 60)])]
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
        .limit(
            "small",
            MemoryStore::new(Gcra::new(5, Duration::from_secs(3600)).unwrap()),
        )
        .cost(|_: &http::request::Parts| 6)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let res = send(&app).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_none());
    // `t` does not invite a retry: the key is full, so it is the window.
    let member = members(res.headers().get(RATELIMIT).unwrap()).remove(0);
    assert_eq!(member.1, vec![("r".to_owned(), 5), ("t".to_owned(), 3600)]);
    let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
    assert!(body.get("retry_after").is_none());
    assert!(body["detail"].as_str().unwrap().contains("never"));
}

/// `(name, params)` of each member of a structured-field List, parsed by
/// `sfv` (RFC 8941): names are Strings, parameters Integers.
fn members(value: &axum::http::HeaderValue) -> Vec<(String, Vec<(String, i64)>)> {
    let list: sfv::List = sfv::Parser::new(value.as_bytes())
        .parse()
        .unwrap_or_else(|e| panic!("{value:?} is not a List: {e}"));
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("an inner list in {value:?}");
            };
            let name = item.bare_item.as_string().expect("a String").as_str();
            let params = item
                .params
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), i64::from(v.as_integer().unwrap())))
                .collect();
            (name.to_owned(), params)
        })
        .collect()
}

#[tokio::test]
async fn fields_parse_as_structured_fields() {
    let clock = ManualClock::new();
    let store = || MemoryStore::new(Gcra::new(2, 60 * SEC).unwrap());
    let layer = RateLimitLayer::builder(Global)
        // One name rule (ratelimit_core::plumbing::is_valid_limit_name): no spaces or
        // quotes; a backslash is escaped in the fields' strings.
        .limit(r"per\minute\ip", store())
        .limit("b", store())
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let name = r"per\minute\ip".to_owned();
    let res = send(&app).await;
    assert_eq!(
        members(&res.headers()[RATELIMIT_POLICY]),
        [
            (name.clone(), vec![("q".into(), 2), ("w".into(), 60)]),
            ("b".into(), vec![("q".into(), 2), ("w".into(), 60)]),
        ]
    );
    assert_eq!(
        members(&res.headers()[RATELIMIT]),
        [
            (name.clone(), vec![("r".into(), 1), ("t".into(), 30)]),
            ("b".into(), vec![("r".into(), 1), ("t".into(), 30)]),
        ]
    );
    send(&app).await;
    let res = send(&app).await;
    assert_eq!(res.status(), 429);
    assert_eq!(
        members(&res.headers()[RATELIMIT]),
        [(name, vec![("r".into(), 0), ("t".into(), 30)])]
    );
}

/// Admitted with `r=0`, `t` is the `Retry-After` of the next request,
/// denied at the same instant (draft-10: `t` and `Retry-After` name the
/// same point in time), for every algorithm.
#[tokio::test]
async fn t_with_nothing_left_is_the_next_retry_after() {
    use ratelimit_core::{FixedWindow, LeakyBucket, SlidingWindow, TokenBucket};
    async fn case<A: Algorithm>(alg: A, step: Duration) {
        let clock = ManualClock::new();
        clock.advance(Duration::from_millis(12_345));
        let name = alg.name();
        let app = app(alg, &clock, Headers::new());
        // Spend the quota at staggered instants, so that the next unit
        // comes back before the whole quota does.
        let last = loop {
            let res = send(&app).await;
            assert_eq!(res.status(), 200, "{name}");
            let (_, params) = members(&res.headers()[RATELIMIT]).remove(0);
            if params[0].1 == 0 {
                break params[1].1;
            }
            clock.advance(step);
        };
        let denied = send(&app).await;
        assert_eq!(denied.status(), 429, "{name}");
        let retry: i64 = denied.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            last, retry,
            "{name}: admitted r=0 t vs the 429's Retry-After"
        );
        let (_, params) = members(&denied.headers()[RATELIMIT]).remove(0);
        assert_eq!(params, [("r".into(), 0), ("t".into(), retry)], "{name}");
    }
    let min = 60 * SEC;
    let step = Duration::from_secs(7);
    case(Gcra::new(5, min).unwrap(), step).await;
    case(TokenBucket::new(5, 5, min).unwrap(), step).await;
    case(LeakyBucket::new(5, min, 4).unwrap(), Duration::ZERO).await;
    case(FixedWindow::new(5, min).unwrap(), step).await;
    case(SlidingLog::new(5, min).unwrap(), step).await;
    case(SlidingWindow::new(5, min).unwrap(), step).await;
}
