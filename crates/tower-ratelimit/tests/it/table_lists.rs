//! Allow and deny lists in a policy table: an allow-listed CIDR passes
//! 1,000 requests on a 2/day limit, a deny-listed one gets 403 with a
//! problem body, both matched on the client IP behind a trusted proxy;
//! exact keys; top-level lists; bad entries refused at load.

use crate::common::{body_string, get_from};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::key::ClientIp;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};

const TABLE: &str = r#"
[[limit]]
name = "daily"
algorithm = "fixed-window 2/1d"
key = "client-ip"
routes = ["/items"]
allow = ["10.0.0.0/8", "2001:db8:aa::/48"]
deny = ["198.51.100.0/24"]
"#;

fn app(table: &str) -> Router {
    let table = PolicyTable::from_toml(table, None).unwrap();
    let options = PolicyOptions {
        client_ip: Some(ClientIp::new(["192.0.2.1/32"]).unwrap()),
        clock: Some(Arc::new(ratelimit_core::ManualClock::new())),
        ..PolicyOptions::default()
    };
    let router = Router::new()
        .route("/items", get(|| async { "items" }))
        .route("/other", get(|| async { "other" }));
    table
        .apply_in_memory(router, &options, Some(1000))
        .unwrap()
        .0
}

/// A request through the trusted proxy 192.0.2.1 for `client`.
async fn via_proxy(app: &Router, client: &str, uri: &str) -> (StatusCode, String) {
    let req = get_from(
        "192.0.2.1:1",
        uri,
        &[("x-forwarded-for", client.as_bytes())],
    );
    let res = app.clone().oneshot(req).await.unwrap();
    (res.status(), body_string(res).await)
}

#[tokio::test]
async fn an_allow_listed_cidr_passes_1000_requests_on_a_2_per_day_limit() {
    let app = app(TABLE);
    for client in ["10.1.2.3", "2001:db8:aa:1::9"] {
        for i in 0..1000 {
            assert_eq!(
                via_proxy(&app, client, "/items").await.0,
                StatusCode::OK,
                "{client} {i}"
            );
        }
    }
    // Others are limited as usual.
    for _ in 0..2 {
        assert_eq!(
            via_proxy(&app, "203.0.113.5", "/items").await.0,
            StatusCode::OK
        );
    }
    assert_eq!(
        via_proxy(&app, "203.0.113.5", "/items").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_deny_listed_cidr_gets_403_with_a_problem_body_on_the_limits_routes() {
    let app = app(TABLE);
    let (status, body) = via_proxy(&app, "198.51.100.77", "/items").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], 403);
    assert_eq!(body["detail"], "Client IP on the deny list.");
    // Off the limit's routes the list does not apply.
    assert_eq!(
        via_proxy(&app, "198.51.100.77", "/other").await.0,
        StatusCode::OK
    );
    // The list is matched on the client the proxy names, not the proxy,
    // and an untrusted peer's header is not believed.
    let req = get_from(
        "203.0.113.9:1",
        "/items",
        &[("x-forwarded-for", b"198.51.100.77")],
    );
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn top_level_lists_and_exact_keys() {
    let table = r#"
allow = ["vip-token"]
deny = ["203.0.113.0/24"]

[[limit]]
name = "tickets"
algorithm = "gcra 1/1h"
key = "bearer"
routes = ["/items"]
"#;
    let app = app(table);
    let bearer = |client: &'static str, token: &'static str| {
        get_from(
            "192.0.2.1:1",
            "/items",
            &[
                ("x-forwarded-for", client.as_bytes()),
                (
                    "authorization",
                    format!("Bearer {token}").into_bytes().leak(),
                ),
            ],
        )
    };
    for _ in 0..10 {
        let res = app
            .clone()
            .oneshot(bearer("192.0.2.50", "vip-token"))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    let res = app
        .clone()
        .oneshot(bearer("192.0.2.50", "other"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .clone()
        .oneshot(bearer("192.0.2.50", "other"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    // A CIDR on a limit keyed on a token: matched on the client IP.
    let res = app
        .clone()
        .oneshot(bearer("203.0.113.1", "vip-token"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
}

#[test]
fn bad_list_entries_are_refused_naming_the_limit() {
    let text = TABLE.replace("\"198.51.100.0/24\"", "\"198.51.100.0/33\"");
    let e = PolicyTable::from_toml(&text, None).unwrap_err().to_string();
    assert!(e.contains("daily") && e.contains("198.51.100.0/33"), "{e}");
    let e = PolicyTable::from_toml(&format!("deny = [\"\"]\n{TABLE}"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad list entry"), "{e}");
}

#[tokio::test]
async fn entries_added_at_run_time_hold_for_their_ttl() {
    use std::time::Duration;
    use tower_ratelimit::policy::ListKind;
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let clock = ratelimit_core::ManualClock::new();
    let options = PolicyOptions {
        client_ip: Some(ClientIp::new(["192.0.2.1/32"]).unwrap()),
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let router = Router::new().route("/items", get(|| async { "items" }));
    let (app, limits) = table.apply_in_memory(router, &options, Some(1000)).unwrap();
    limits
        .add_to_list(ListKind::Allow, "203.0.113.0/24", Duration::from_secs(60))
        .await
        .unwrap();
    for _ in 0..10 {
        assert_eq!(
            via_proxy(&app, "203.0.113.5", "/items").await.0,
            StatusCode::OK
        );
    }
    limits
        .add_to_list(ListKind::Deny, "192.0.2.99", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        via_proxy(&app, "192.0.2.99", "/items").await.0,
        StatusCode::FORBIDDEN
    );
    // The TTL ends: limited again (2 a day), and no longer denied.
    clock.advance(Duration::from_secs(61));
    for _ in 0..2 {
        assert_eq!(
            via_proxy(&app, "203.0.113.5", "/items").await.0,
            StatusCode::OK
        );
    }
    assert_eq!(
        via_proxy(&app, "203.0.113.5", "/items").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        via_proxy(&app, "192.0.2.99", "/items").await.0,
        StatusCode::OK
    );
    // Removed before its TTL ends.
    limits
        .add_to_list(ListKind::Deny, "192.0.2.98", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(limits
        .remove_from_list(ListKind::Deny, "192.0.2.98")
        .await
        .unwrap());
    assert!(!limits
        .remove_from_list(ListKind::Deny, "192.0.2.98")
        .await
        .unwrap());
    assert_eq!(
        via_proxy(&app, "192.0.2.98", "/items").await.0,
        StatusCode::OK
    );
    assert!(limits
        .add_to_list(ListKind::Allow, "10.0.0.0/99", Duration::from_secs(1))
        .await
        .is_err());
}
