//! Closures as strategies, given to the one builder method of each strategy.

use crate::common::*;
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use ratelimit_core::{Gcra, MemoryStore};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::fair::FairQueueLayer;
use tower_ratelimit::key::{HeaderKey, KeyError};
use tower_ratelimit::policy::Selection;
use tower_ratelimit::response::Rejection;
use tower_ratelimit::RateLimitLayer;

fn request(method: Method, uri: &str, user: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(u) = user {
        b = b.header("x-user", u);
    }
    b.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn plain_closures_infer_and_take_effect() {
    let layer = RateLimitLayer::builder(|req: &Parts| {
        req.headers
            .get("x-user")
            .map(|v| HeaderKey::new(v.as_bytes()))
            .ok_or(KeyError::missing("X-User header"))
    })
    .limit(
        "user",
        MemoryStore::new(Gcra::new(4, Duration::from_secs(60)).unwrap()),
    )
    .cost(|req: &Parts| if req.method == Method::POST { 2 } else { 1 })
    .select(|_req: &Parts, key: &HeaderKey| {
        if key.stored() == "staff" {
            Selection::NONE
        } else {
            Selection::ALL
        }
    })
    .count_if(|res: &http::response::Parts| res.status != StatusCode::NOT_FOUND)
    .clock(|| 0)
    .response(|rejection: Rejection<'_>| {
        let (status, text) = match rejection {
            Rejection::Limited(_) => (StatusCode::TOO_MANY_REQUESTS, "slow down"),
            Rejection::KeyError(e) => (e.status(), "who are you?"),
            _ => (StatusCode::SERVICE_UNAVAILABLE, "later"),
        };
        Response::builder()
            .status(status)
            .body(Body::from(text))
            .unwrap()
    })
    .build()
    .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }).post(|| async { "ok" }))
        .layer(layer);
    let send = |m: Method, uri: &'static str, user: Option<&'static str>| {
        app.clone().oneshot(request(m, uri, user))
    };
    // Not found: not counted (count_if).
    for _ in 0..10 {
        let res = send(Method::GET, "/nowhere", Some("ann")).await.unwrap();
        assert_eq!(res.status(), 404);
    }
    // A POST costs 2 (cost): two fill the limit of 4.
    for _ in 0..2 {
        let res = send(Method::POST, "/", Some("ann")).await.unwrap();
        assert_eq!(res.status(), 200);
    }
    let res = send(Method::GET, "/", Some("ann")).await.unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(body_string(res).await, "slow down");
    // Staff are not limited (select).
    for _ in 0..10 {
        let res = send(Method::POST, "/", Some("staff")).await.unwrap();
        assert_eq!(res.status(), 200);
    }
    // No key (the key closure's error), answered by response.
    let res = send(Method::GET, "/", None).await.unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(body_string(res).await, "who are you?");
}

#[tokio::test]
async fn plain_closures_in_a_fair_queue() {
    let layer = FairQueueLayer::builder(|req: &Parts| match req.headers.get("x-user") {
        Some(user) => Ok(user.len()),
        None => Err(KeyError::missing("X-User header")),
    })
    .cost(|req: &Parts| if req.method == Method::POST { 2 } else { 1 })
    .response(|_rejection: Rejection<'_>| {
        Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(Body::from("busy"))
            .unwrap()
    })
    .build()
    .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let res = app
        .clone()
        .oneshot(request(Method::GET, "/", Some("ann")))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = app.oneshot(request(Method::GET, "/", None)).await.unwrap();
    assert_eq!(body_string(res).await, "busy");
}
