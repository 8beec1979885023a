//! `reset-on` in a policy table: a successful login resets the client's
//! failed-login count on that limit, and only there (the network's limit
//! keeps counting); the builder's `reset_if` does the same.

use crate::common::get_from;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use axum::Router;
use ratelimit_core::{ManualClock, MemoryStore, SlidingLog};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
use tower_ratelimit::strategy::StatusIs;
use tower_ratelimit::RateLimitLayer;

const TABLE: &str = r#"
[[limit]]
name = "login-failures"
algorithm = "sliding-log 3/1h"
key = "peer-ip"
routes = ["POST /login"]
count = [401]
reset-on = [200]

[[limit]]
name = "login-failures-network"
algorithm = "sliding-log 5/1h"
key = "peer-ip(v4/24)"
routes = ["POST /login"]
count = [401]
"#;

/// `POST /login`: 200 with the header `x-password: right`, else 401.
fn router() -> Router {
    Router::new().route(
        "/login",
        post(|headers: axum::http::HeaderMap| async move {
            match headers.get("x-password") {
                Some(v) if v == "right" => StatusCode::OK,
                _ => StatusCode::UNAUTHORIZED,
            }
        }),
    )
}

async fn login(app: &Router, peer: &str, right: bool) -> StatusCode {
    let password: &[u8] = if right { b"right" } else { b"wrong" };
    let mut req = get_from(peer, "/login", &[("x-password", password)]);
    *req.method_mut() = Method::POST;
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn a_successful_login_resets_the_clients_failures_not_the_networks() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    assert_eq!(table.entries()[0].reset_on, Some(vec![StatusCode::OK]));
    let clock = ManualClock::new();
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let (app, _) = table.apply_in_memory(router(), &options, None).unwrap();
    let peer = "10.0.0.1:1";
    for _ in 0..2 {
        assert_eq!(login(&app, peer, false).await, StatusCode::UNAUTHORIZED);
    }
    // The third failure would use the last slot; a success first forgets
    // the two.
    assert_eq!(login(&app, peer, true).await, StatusCode::OK);
    for _ in 0..3 {
        assert_eq!(login(&app, peer, false).await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        login(&app, peer, false).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The network counted all 5 failures: its limit was not reset, so
    // another address of the /24 is refused at once.
    assert_eq!(
        login(&app, "10.0.0.2:1", false).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance(Duration::from_secs(3601));
    assert_eq!(login(&app, peer, false).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn reset_if_on_a_builder_layer() {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "login",
            MemoryStore::new(SlidingLog::new(2, Duration::from_secs(3600)).unwrap()),
        )
        .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
        .reset_if(StatusIs::new(StatusCode::OK))
        .build()
        .unwrap();
    let app = router().layer(layer);
    let peer = "10.0.0.1:1";
    for round in 0..3 {
        assert_eq!(
            login(&app, peer, false).await,
            StatusCode::UNAUTHORIZED,
            "{round}"
        );
        assert_eq!(login(&app, peer, true).await, StatusCode::OK, "{round}");
    }
    for _ in 0..2 {
        assert_eq!(login(&app, peer, false).await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        login(&app, peer, false).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}
