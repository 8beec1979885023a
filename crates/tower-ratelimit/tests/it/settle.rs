//! Reserve, then settle: a cost read after the response (header, extension, reported per event, body bytes, trailers), debt, refunds, disconnects, and all-or-nothing across limits.

use crate::common::*;
use axum::body::Body;
use axum::extract::{Extension, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use ratelimit_core::{Clock, Decision, FixedWindow, Gcra, ManualClock, MemoryStore, Store};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{Global, GlobalKey};
use tower_ratelimit::strategy::{FixedCost, HeaderCost};
use tower_ratelimit::{ActualCost, CostFrom, CostReport, MeteredBody, RateLimitLayer};

type Fixed = MemoryStore<FixedWindow, GlobalKey>;

/// `?tokens=N&events=E` of a request.
fn query(req: &Request, name: &str) -> u64 {
    let q = req.uri().query().unwrap_or("");
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Uses `?tokens=` and says so in every way a limit can read it.
async fn handler(report: Option<Extension<CostReport>>, req: Request) -> Response {
    let tokens = query(&req, "tokens");
    let Some(Extension(report)) = report else {
        return StatusCode::OK.into_response(); // no layer settles
    };
    if !report.cost_from().from_body() {
        let mut res = [("x-tokens-used", tokens.to_string())].into_response();
        res.extensions_mut().insert(ActualCost(tokens));
        return res;
    }
    if matches!(report.cost_from(), CostFrom::Reported) {
        // One event per 100 tokens, each reported as it is produced.
        let events = (0..tokens / 100).map(move |_| {
            report.add(100);
            Ok::<_, Infallible>(Bytes::from_static(b"data: 100 tokens\n\n"))
        });
        return Body::from_stream(futures_util::stream::iter(events)).into_response();
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("x-tokens-used", tokens.into());
    let frames = [
        Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'x'; tokens as usize]))),
        Ok(Frame::trailers(trailers)),
    ];
    let body = StreamBody::new(futures_util::stream::iter(frames));
    Body::new(MeteredBody::new(body, report)).into_response()
}

/// A layer settling from `from` over one limit of `store`.
fn app(store: &Arc<Fixed>, from: CostFrom, estimate: u64, clock: &ManualClock) -> Router {
    let layer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("tokens", Arc::clone(store))
        .cost(FixedCost::new(estimate).unwrap())
        .settle(from)
        .clock(clock.clone())
        .build()
        .unwrap();
    Router::new().route("/chat", get(handler)).layer(layer)
}

fn fixed(limit: u64) -> Arc<Fixed> {
    Arc::new(MemoryStore::new(
        FixedWindow::new(limit, Duration::from_secs(86_400)).unwrap(),
    ))
}

fn peek(store: &Fixed, clock: &ManualClock) -> Decision {
    store.check(&GlobalKey, 0, clock.now()).value().unwrap()
}

async fn call(app: &Router, tokens: u64) -> Response {
    let req = get_from("192.0.2.1:1", &format!("/chat?tokens={tokens}"), &[]);
    app.clone().oneshot(req).await.unwrap()
}

/// Reads a whole response, as a client that stays to the end.
async fn drain(res: Response) {
    res.into_body().collect().await.unwrap();
}

#[tokio::test]
async fn each_kind_of_cost_from_settles_to_what_was_used() {
    let kinds = [
        "response-header:x-tokens-used",
        "extension",
        "reported",
        "body-bytes",
        "trailer:x-tokens-used",
    ];
    for kind in kinds {
        let clock = ManualClock::new();
        let store = fixed(10_000);
        let app = app(&store, kind.parse().unwrap(), 1, &clock);
        let res = call(&app, 700).await;
        assert_eq!(res.status(), StatusCode::OK, "{kind}");
        drain(res).await;
        assert_eq!(peek(&store, &clock).remaining, 10_000 - 700, "{kind}");
    }
}

#[tokio::test]
async fn settling_down_refunds_and_a_missing_value_keeps_the_estimate() {
    let clock = ManualClock::new();
    let store = fixed(1000);
    let app = app(
        &store,
        "response-header:x-tokens-used".parse().unwrap(),
        300,
        &clock,
    );
    drain(call(&app, 40).await).await;
    assert_eq!(peek(&store, &clock).remaining, 960, "300 reserved, 40 used");
    // A handler that names no cost: the estimate stands.
    let layer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("tokens", Arc::clone(&store))
        .cost(FixedCost::new(300).unwrap())
        .settle("response-header:x-tokens-used".parse().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let silent = Router::new()
        .route("/chat", get(|| async { "ok" }))
        .layer(layer);
    drain(call(&silent, 0).await).await;
    assert_eq!(peek(&store, &clock).remaining, 660);
}

#[tokio::test]
async fn settling_up_goes_into_debt_and_denies_until_it_is_repaid() {
    // 100 per 100 s: one token back per second.
    let clock = ManualClock::new();
    let store = Arc::new(MemoryStore::new(
        Gcra::new(100, Duration::from_secs(100)).unwrap(),
    ));
    let layer = RateLimitLayer::<_, MemoryStore<Gcra, GlobalKey>>::builder(Global)
        .limit("tokens", Arc::clone(&store))
        .settle("response-header:x-tokens-used".parse().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new().route("/chat", get(handler)).layer(layer);
    let res = call(&app, 150).await;
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "admitted on its estimate of 1"
    );
    // The response's fields show the reservation (1 of 100), not the debt.
    assert_eq!(res.headers()["ratelimit"], "\"tokens\";r=99;t=1");
    drain(res).await;
    let res = call(&app, 1).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    // 50 tokens of debt, then the request's own 1: 51 s.
    assert_eq!(res.headers()["retry-after"], "51");
    clock.advance(Duration::from_secs(50));
    assert_eq!(call(&app, 1).await.status(), StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(1));
    assert_eq!(call(&app, 1).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_stream_cut_after_three_events_charges_three_events() {
    let clock = ManualClock::new();
    let store = fixed(100_000);
    let app = app(&store, CostFrom::Reported, 1, &clock);
    let res = call(&app, 1000).await;
    let mut body = res.into_body();
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    // Not settled while the stream lives: the reservation of 1 stands.
    assert_eq!(peek(&store, &clock).remaining, 100_000 - 1);
    drop(body); // The client went away.
    assert_eq!(peek(&store, &clock).remaining, 100_000 - 300);
}

#[tokio::test]
async fn a_body_dropped_midway_charges_the_bytes_sent() {
    let clock = ManualClock::new();
    let store = fixed(100_000);
    let app = app(&store, CostFrom::BodyBytes, 1, &clock);
    let mut body = call(&app, 5000).await.into_body();
    body.frame().await.unwrap().unwrap(); // the data, not the trailers
    drop(body);
    assert_eq!(peek(&store, &clock).remaining, 100_000 - 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_settlements_lose_no_update() {
    let clock = ManualClock::new();
    let store = fixed(1_000_000);
    let app = app(
        &store,
        "response-header:x-tokens-used".parse().unwrap(),
        50,
        &clock,
    );
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            drain(call(&app, i * 7 + 1).await).await;
            i * 7 + 1
        }));
    }
    let mut used = 0;
    for t in tasks {
        used += t.await.unwrap();
    }
    assert_eq!(peek(&store, &clock).remaining, 1_000_000 - used);
}

#[tokio::test]
async fn a_request_the_token_limit_refuses_takes_nothing_from_the_request_limit() {
    let clock = ManualClock::new();
    let requests = fixed(60);
    let tokens = fixed(100);
    let outer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("requests", Arc::clone(&requests))
        .refund_on_inner_limit()
        .clock(clock.clone())
        .build()
        .unwrap();
    let inner = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("tokens", Arc::clone(&tokens))
        .settle("response-header:x-tokens-used".parse().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/chat", get(handler))
        .layer(inner)
        .layer(outer);
    drain(call(&app, 150).await).await; // into debt
    assert_eq!(peek(&requests, &clock).remaining, 59);
    let res = call(&app, 1).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        peek(&requests, &clock).remaining,
        59,
        "the refusal was given back"
    );
    assert_eq!(
        peek(&tokens, &clock).remaining,
        0,
        "still in debt, nothing more taken"
    );
}

#[tokio::test]
async fn one_layer_s_limits_consume_only_when_all_admit() {
    // check.rs: a request the second limit refuses is refunded on the first.
    let clock = ManualClock::new();
    let first = fixed(10);
    let second = fixed(1);
    let layer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("first", Arc::clone(&first))
        .limit("second", Arc::clone(&second))
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new().route("/chat", get(handler)).layer(layer);
    assert_eq!(call(&app, 0).await.status(), StatusCode::OK);
    for _ in 0..3 {
        assert_eq!(call(&app, 0).await.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(peek(&first, &clock).remaining, 9);
}

#[tokio::test]
async fn stacked_settling_layers_each_settle_what_the_handler_reports() {
    // A per-route budget inside an app-wide one: the one report the
    // handler sees feeds both.
    let clock = ManualClock::new();
    let (outer, inner) = (fixed(100_000), fixed(100_000));
    let layer = |store: &Arc<Fixed>, name: &'static str| {
        RateLimitLayer::<_, Fixed>::builder(Global)
            .limit(name, Arc::clone(store))
            .cost(FixedCost::new(1).unwrap())
            .settle(CostFrom::Reported)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let app = Router::new()
        .route("/chat", get(handler).layer(layer(&inner, "route")))
        .layer(layer(&outer, "app"));
    let mut body = call(&app, 1000).await.into_body();
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    drop(body);
    assert_eq!(peek(&inner, &clock).remaining, 100_000 - 300, "inner");
    assert_eq!(peek(&outer, &clock).remaining, 100_000 - 300, "outer");
}

/// A layer over `store` reserving `estimate`, settled from `from`, whose
/// handler adds `?added=` on its report and answers `x-tokens-used:
/// ?used=` as written (and an `ActualCost` of it, 0 when not a number).
fn reporting(store: &Arc<Fixed>, from: &str, estimate: u64, clock: &ManualClock) -> Router {
    let layer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("tokens", Arc::clone(store))
        .cost(FixedCost::new(estimate).unwrap())
        .settle(from.parse().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let handler = |Extension(report): Extension<CostReport>, req: Request| async move {
        report.add(query(&req, "added"));
        let q = req.uri().query().unwrap_or("");
        let used = q.split('&').find_map(|kv| kv.strip_prefix("used="));
        let mut res = match used {
            Some(used) => [("x-tokens-used", used.to_owned())].into_response(),
            None => StatusCode::OK.into_response(),
        };
        res.extensions_mut().insert(ActualCost(query(&req, "used")));
        res
    };
    Router::new().route("/chat", get(handler)).layer(layer)
}

async fn send(app: &Router, query: &str) {
    let req = get_from("192.0.2.1:1", &format!("/chat?{query}"), &[]);
    drain(app.clone().oneshot(req).await.unwrap()).await;
}

#[tokio::test]
async fn a_response_value_of_0_does_not_erase_what_was_reported() {
    for from in ["response-header:x-tokens-used", "extension"] {
        let clock = ManualClock::new();
        let store = fixed(10_000);
        let app = reporting(&store, from, 300, &clock);
        send(&app, "added=700&used=0").await;
        assert_eq!(peek(&store, &clock).remaining, 10_000 - 700, "{from}");
        // The larger of the two, whichever it is.
        send(&app, "added=100&used=400").await;
        assert_eq!(peek(&store, &clock).remaining, 10_000 - 1100, "{from}");
    }
}

#[tokio::test]
async fn a_malformed_response_value_settles_to_at_least_the_reservation() {
    let clock = ManualClock::new();
    let store = fixed(10_000);
    let app = reporting(&store, "response-header:x-tokens-used", 300, &clock);
    let mut used = 0;
    // (value, added): the larger of the reservation and what was added.
    for (value, added, charged) in [
        ("abc", 0, 300),
        ("-5", 100, 300),
        ("%2B5", 0, 300), // +5: no sign is a decimal
        ("1.5", 0, 300),
        ("abc", 700, 700),
    ] {
        send(&app, &format!("added={added}&used={value}")).await;
        used += charged;
        assert_eq!(peek(&store, &clock).remaining, 10_000 - used, "{value}");
    }
}

#[tokio::test]
async fn a_malformed_trailer_settles_to_at_least_the_reservation() {
    let clock = ManualClock::new();
    let store = fixed(10_000);
    let layer = RateLimitLayer::<_, Fixed>::builder(Global)
        .limit("tokens", Arc::clone(&store))
        .cost(FixedCost::new(300).unwrap())
        .settle("trailer:x-tokens-used".parse().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let handler = |Extension(report): Extension<CostReport>, req: Request| async move {
        let value = req.uri().query().unwrap_or("").to_owned();
        report.add(100);
        let mut trailers = HeaderMap::new();
        trailers.insert("x-tokens-used", value.parse().unwrap());
        let frames = [Ok::<_, Infallible>(Frame::<Bytes>::trailers(trailers))];
        let body = StreamBody::new(futures_util::stream::iter(frames));
        Body::new(MeteredBody::new(body, report)).into_response()
    };
    let app = Router::new().route("/chat", get(handler)).layer(layer);
    // 100 added, then the trailer: the larger of the reservation and 100.
    send(&app, "abc").await;
    assert_eq!(peek(&store, &clock).remaining, 10_000 - 300);
    // A trailer of 0 does not erase the 100 added.
    send(&app, "0").await;
    assert_eq!(peek(&store, &clock).remaining, 10_000 - 400);
}

#[test]
fn a_header_cost_falling_back_to_0_or_capped_below_its_fallback_is_refused() {
    let name = || http::HeaderName::from_static("x-max-tokens");
    let err = HeaderCost::new(name(), 0).unwrap_err().to_string();
    assert!(err.contains("x-max-tokens: a fallback of 0"), "{err}");
    let err = HeaderCost::new(name(), 10)
        .unwrap()
        .at_most(5)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the cap 5 is below the fallback 10"), "{err}");
    assert!(HeaderCost::new(name(), 10).unwrap().at_most(10).is_ok());
}

#[tokio::test]
async fn a_report_tells_the_handler_what_was_reserved() {
    let clock = ManualClock::new();
    let store = fixed(1_000_000);
    let cost = HeaderCost::new(http::HeaderName::from_static("x-max-tokens"), 4000)
        .unwrap()
        .at_most(4000)
        .unwrap();
    let layer = |name: &'static str, cost: Box<dyn tower_ratelimit::strategy::Cost>| {
        RateLimitLayer::<_, Fixed>::builder(Global)
            .limit(name, Arc::clone(&store))
            .cost(cost)
            .settle(CostFrom::Reported)
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let handler = |Extension(report): Extension<CostReport>| async move {
        [("x-reserved", report.reserved().to_string())]
    };
    let one = Router::new()
        .route("/chat", get(handler))
        .layer(layer("one", Box::new(cost.clone())));
    let reserved = |app: Router, max: &'static str| async move {
        let headers: Vec<(&str, &[u8])> = match max {
            "" => vec![],
            m => vec![("x-max-tokens", m.as_bytes())],
        };
        let res = app
            .oneshot(get_from("192.0.2.1:1", "/chat", &headers))
            .await
            .unwrap();
        res.headers()["x-reserved"].to_str().unwrap().to_owned()
    };
    assert_eq!(reserved(one.clone(), "").await, "4000");
    assert_eq!(reserved(one.clone(), "0").await, "4000");
    assert_eq!(reserved(one.clone(), "250").await, "250");
    assert_eq!(reserved(one, "9000").await, "4000");
    // Stacked: the least any layer reserved.
    let both = Router::new()
        .route(
            "/chat",
            get(handler).layer(layer("inner", Box::new(FixedCost::new(100).unwrap()))),
        )
        .layer(layer("outer", Box::new(cost)));
    assert_eq!(reserved(both, "").await, "100");
}
