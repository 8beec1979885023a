//! `ban` in a policy table: once the limit denies an IP, it stays at 429
//! for the ban, with `Retry-After` the ban's remaining time and a body
//! saying it is a ban; escalation; bad ban settings refused at load.

use crate::common::{body_string, get_from};
use axum::http::{Method, StatusCode};
use axum::routing::post;
use axum::Router;
use ratelimit_core::ManualClock;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::table::{PolicyOptions, PolicyTable};

const TABLE: &str = r#"
[[limit]]
name = "login"
algorithm = "fixed-window 2/2s"
key = "client-ip"
routes = ["POST /login"]
count = [401]
ban = "6s"
"#;

fn app(table: &str, clock: &ManualClock) -> Router {
    let table = PolicyTable::from_toml(table, None).unwrap();
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let router = Router::new().route("/login", post(|| async { StatusCode::UNAUTHORIZED }));
    table
        .apply_in_memory(router, &options, Some(1000))
        .unwrap()
        .0
}

async fn login(app: &Router) -> (StatusCode, Option<u64>, String) {
    let mut req = get_from("10.0.0.1:1", "/login", &[]);
    *req.method_mut() = Method::POST;
    let res = app.clone().oneshot(req).await.unwrap();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (res.status(), retry, body_string(res).await)
}

#[tokio::test]
async fn a_ban_holds_an_ip_at_429_past_the_window_then_lets_it_try_again() {
    let clock = ManualClock::new();
    let app = app(TABLE, &clock);
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
    // The third attempt is denied: the ban starts.
    let (status, retry, body) = login(&app).await;
    assert_eq!((status, retry), (StatusCode::TOO_MANY_REQUESTS, Some(6)));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["banned"], true, "{body}");
    assert_eq!(body["retry_after"], 6);
    // 3 s after the second failure the window has turned over; the ban
    // still holds.
    clock.advance(Duration::from_secs(3));
    let (status, retry, _) = login(&app).await;
    assert_eq!((status, retry), (StatusCode::TOO_MANY_REQUESTS, Some(3)));
    // After 7 s the IP may try again.
    clock.advance(Duration::from_secs(4));
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn repeat_offences_escalate() {
    let clock = ManualClock::new();
    let table = format!("{TABLE}ban-escalate = 2.0\nban-max = \"20s\"\nban-forgive = \"1m\"\n");
    let app = app(&table, &clock);
    let mut bans = Vec::new();
    for _ in 0..4 {
        assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
        let (status, retry, _) = login(&app).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        bans.push(retry.unwrap());
        clock.advance(Duration::from_secs(retry.unwrap()));
    }
    assert_eq!(bans, [6, 12, 20, 20]);
}

#[test]
fn bad_ban_settings_are_refused_naming_them() {
    for (extra, needle) in [
        ("ban = \"0s\"", "expected 1ms to 366d"),
        ("ban = \"soon\"", "bad duration"),
        ("ban = \"1h\"\nban-escalate = 0.5", "ban-escalate 0.5"),
        ("ban = \"1h\"\nban-max = \"1m\"", "ban-max"),
        ("ban-max = \"1h\"", "need a ban"),
    ] {
        let text = TABLE.replace("ban = \"6s\"", extra);
        let e = PolicyTable::from_toml(&text, None).unwrap_err().to_string();
        assert!(e.contains(needle) && e.contains("login"), "{extra}: {e}");
    }
}
