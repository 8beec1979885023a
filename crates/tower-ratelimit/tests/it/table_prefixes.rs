//! Policy-table limits over address prefixes (`client-ip(v4/24, v6/48)`):
//! rotating addresses through a trusted proxy's `X-Forwarded-For` stays
//! within the network's limit, and bad prefix lengths are refused at load.

use crate::common::{get_from, Hits};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use ratelimit_core::ManualClock;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::ClientIp;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};

/// 5 failed logins per hour per address or /64, 100 per /24 or /48.
const TABLE: &str = r#"
[[limit]]
name = "login-failures"
algorithm = "sliding-log 5/1h"
key = "client-ip"
routes = ["POST /login"]
count = [401]

[[limit]]
name = "login-failures-site"
algorithm = "sliding-log 100/1h"
key = "client-ip(v4/24, v6/48)"
routes = ["POST /login"]
count = [401]
"#;

/// The table's app behind a trusted proxy (10.0.0.0/8) whose every login
/// fails, and how many password checks it made.
fn app(table: &str, clock: &ManualClock) -> (Router, Hits) {
    let hits = Hits::default();
    let h = hits.clone();
    let router = Router::new().route(
        "/login",
        post(move || async move {
            h.hit();
            StatusCode::UNAUTHORIZED
        }),
    );
    let options = PolicyOptions {
        client_ip: Some(ClientIp::new(["10.0.0.0/8"]).unwrap()),
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let table = PolicyTable::from_toml(table, None).unwrap();
    let (router, _) = table.apply_in_memory(router, &options, None).unwrap();
    (router, hits)
}

/// A failed login forwarded by the proxy for `xff`.
async fn login(app: &Router, xff: &str) -> StatusCode {
    let mut req = get_from(
        "10.0.0.1:4000",
        "/login",
        &[("x-forwarded-for", xff.as_bytes())],
    );
    *req.method_mut() = http::Method::POST;
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn rotating_64s_inside_one_48_is_held_to_the_48s_limit() {
    let clock = ManualClock::new();
    let (app, hits) = app(TABLE, &clock);
    // One /64, many addresses: its own 5.
    for i in 0..20 {
        login(&app, &format!("2001:db8:7:0::{i:x}")).await;
    }
    assert_eq!(hits.get(), 5);
    // 2,000 /64s of the same /48, forged leftmost entries included: the
    // /48's 100 in all, each /64 at most 5.
    let mut passed = 0;
    for i in 1..=2000u32 {
        let xff = format!("6.6.6.{}, 2001:db8:7:{i:x}::1", i % 250);
        if login(&app, &xff).await == StatusCode::UNAUTHORIZED {
            passed += 1;
        }
    }
    assert_eq!(passed, 95);
    assert_eq!(hits.get(), 100);
    // The trade-off: anyone else in that /48 is refused too; another /48
    // is not.
    assert_eq!(
        login(&app, "2001:db8:7:ffff::1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(login(&app, "2001:db8:8::1").await, StatusCode::UNAUTHORIZED);
    // An hour on, the /48 admits again, 5 per /64.
    clock.advance(Duration::from_secs(3600));
    for _ in 0..10 {
        login(&app, "2001:db8:7:5000::1").await;
    }
    assert_eq!(hits.get(), 101 + 5);
}

#[tokio::test]
async fn rotating_addresses_inside_one_24_is_held_to_the_24s_limit() {
    let clock = ManualClock::new();
    let (app, hits) = app(TABLE, &clock);
    // 256 addresses of one /24, 3 attempts each, half of them written as
    // IPv4-mapped IPv6 addresses: one /24.
    for round in 0..3 {
        for i in 0..=255u32 {
            let xff = if i % 2 == 0 {
                format!("198.51.100.{i}")
            } else {
                format!("::ffff:198.51.100.{i}")
            };
            login(&app, &xff).await;
            assert!(hits.get() <= 100, "round {round}, address {i}");
        }
    }
    assert_eq!(hits.get(), 100);
    assert_eq!(login(&app, "198.51.101.1").await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn one_family_given_the_other_keeps_its_default() {
    let clock = ManualClock::new();
    let table = r#"
[[limit]]
name = "per-56"
algorithm = "fixed-window 2/1h"
key = "client-ip(v6/56)"
routes = ["POST /login"]
"#;
    let (app, hits) = app(table, &clock);
    for i in 0..10 {
        login(&app, &format!("2001:db8:7:{i:x}::1")).await; // one /56
        login(&app, &format!("192.0.2.{i}")).await; // ten /32s
    }
    assert_eq!(hits.get(), 2 + 10);
}

#[test]
fn bad_prefix_lengths_are_refused_naming_the_value_and_the_limit() {
    let file = Some(Path::new("limits.toml"));
    for (key, want) in [
        (
            "client-ip(v6/129)",
            "bad IPv6 prefix /129: expected 1 to 128",
        ),
        (
            "client-ip(v6/300)",
            "bad IPv6 prefix /300: expected 1 to 128",
        ),
        (
            "client-ip(v4/33, v6/48)",
            "bad IPv4 prefix /33: expected 1 to 32",
        ),
        ("peer-ip(v4/0)", "bad IPv4 prefix /0: expected 1 to 32"),
        (
            "client-ip(48)",
            "bad prefix lengths \"48\": expected v4/N, v6/N",
        ),
        (
            "client-ip(v6/48, v6/56)",
            "bad prefix lengths \"v6/48, v6/56\"",
        ),
        ("client-ip()", "bad prefix lengths \"\""),
        ("client-ip/48", "unknown key \"client-ip/48\""),
    ] {
        let text =
            format!("[[limit]]\nname = \"site\"\nalgorithm = \"gcra 1/1s\"\nkey = \"{key}\"\n");
        let err = PolicyTable::from_toml(&text, file).unwrap_err().to_string();
        let head = "limits.toml:4: limit \"site\": ";
        assert!(err.starts_with(head), "{key}: {err}");
        assert!(err.contains(want), "{key}: {err}\n(wanted {want})");
        if !key.ends_with("/48") {
            assert!(err.contains(&format!("key {key:?}")), "{key}: {err}");
        }
    }
    // Composites take prefixes too.
    let text = "[[limit]]\nname = \"s\"\nalgorithm = \"gcra 1/1s\"\nkey = \"client-ip(v4/24,v6/48)+route\"\n";
    assert!(PolicyTable::from_toml(text, file).is_ok());
}

#[tokio::test]
async fn overrides_name_a_network_as_its_key_shows_it() {
    let clock = ManualClock::new();
    let table = r#"
[[limit]]
name = "site"
algorithm = "fixed-window 2/1h"
key = "client-ip(v4/24, v6/48)"
routes = ["POST /login"]
overrides = { "198.51.100.0/24" = "fixed-window 4/1h", "2001:db8:7::/48" = "fixed-window 3/1h" }
"#;
    let (app, hits) = app(table, &clock);
    for i in 0..10 {
        login(&app, &format!("198.51.100.{i}")).await;
    }
    assert_eq!(hits.get(), 4);
    for i in 0..10 {
        login(&app, &format!("2001:db8:7:{i:x}::1")).await;
    }
    assert_eq!(hits.get(), 4 + 3);
    for i in 0..10 {
        login(&app, &format!("2001:db8:8:{i:x}::1")).await;
    }
    assert_eq!(hits.get(), 4 + 3 + 2);
}
