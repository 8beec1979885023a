//! `ban` on a descriptor limit: once the limit refuses a client, the client is refused for the ban's length (the answer shows it), until the admin API lifts it; refused at load on a key every client shares.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use ratelimit_core::ManualClock;
use ratelimit_server::Config;
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "ban-admin-token-0123456789";

/// `login`: 2 a minute per address, then a ban of an hour; `per-user`: 5
/// a minute, no ban.
const LIMITS: &str = r#"
[server]
headers = true

[admin]
address = "127.0.0.1:0"

[[limit]]
name = "login"
domain = "edge"
algorithm = "fixed-window 2/1m"
descriptors = [{ key = "path", value = "/login" }, { key = "remote_address" }]
ban = "1h"

[[limit]]
name = "per-user"
domain = "edge"
algorithm = "fixed-window 5/1m"
descriptors = [{ key = "user" }]
"#;

fn token_env(var: &str) -> Option<String> {
    (var == "ADMIN_TOKEN").then(|| TOKEN.to_owned())
}

async fn login(h: &Harness, ip: &str) -> RateLimitResponse {
    let d = descriptor(&[("path", "/login"), ("remote_address", ip)], None);
    h.rls(request("edge", vec![d], 0)).await
}

/// The seconds of `r`'s first status's `duration_until_reset`.
fn until_reset(r: &RateLimitResponse) -> i64 {
    r.statuses[0].duration_until_reset.expect("a reset").seconds
}

fn retry_after(r: &RateLimitResponse) -> Option<u64> {
    let field = r.response_headers_to_add.iter();
    let field = field.into_iter().find(|h| h.key == "retry-after")?;
    field.value.parse().ok()
}

#[tokio::test]
async fn a_refusal_bans_the_client_for_an_hour_until_the_admin_lifts_it() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::parse(LIMITS, "ban.toml", token_env).unwrap();
    let h = Harness::start_config(config, clock.clone()).await;
    let ip = "203.0.113.5";
    for _ in 0..2 {
        assert_eq!(login(&h, ip).await.overall_code, Code::Ok as i32);
    }
    let refused = login(&h, ip).await;
    assert_eq!(refused.overall_code, Code::OverLimit as i32);
    // The ban's hour, not the window's minute.
    assert_eq!(until_reset(&refused), 3600);
    assert_eq!(retry_after(&refused), Some(3600));
    // Two minutes on, the window is new but the ban stands.
    clock.advance(Duration::from_secs(120));
    let banned = login(&h, ip).await;
    assert_eq!(banned.overall_code, Code::OverLimit as i32);
    assert_eq!(until_reset(&banned), 3480);
    assert_eq!(retry_after(&banned), Some(3480));
    // Another client is untouched.
    let other = login(&h, "203.0.113.6").await;
    assert_eq!(other.overall_code, Code::Ok as i32);
    // The admin API shows the ban and lifts it.
    let auth = format!("Bearer {TOKEN}");
    let admin = |method: &'static str, path: String| {
        let auth = auth.clone();
        let h = &h;
        async move {
            let headers = [("authorization", auth.as_str())];
            h.http_at(h.running.admin_addr, method, &path, &headers, "")
                .await
        }
    };
    let a = admin("GET", "/limits".to_owned()).await;
    assert!(a.body.contains("\"ban\":\"1h\""), "{}", a.body);
    // The limit's state key: the one entry without a fixed value.
    let a = admin("GET", format!("/limits/login/keys/{ip}")).await;
    assert!(a.body.contains("\"banned_secs\":3480"), "{}", a.body);
    let a = admin("DELETE", format!("/limits/login/bans/{ip}")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(login(&h, ip).await.overall_code, Code::Ok as i32);
    h.running.stop().await;
}

#[tokio::test]
async fn a_request_refused_by_another_descriptor_takes_nothing_from_a_ban_limit() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::parse(LIMITS, "ban.toml", token_env).unwrap();
    let h = Harness::start_config(config, clock).await;
    let user = || descriptor(&[("user", "alice")], None);
    let ip = || {
        descriptor(
            &[("path", "/login"), ("remote_address", "203.0.113.7")],
            None,
        )
    };
    for _ in 0..5 {
        let r = h.rls(request("edge", vec![user()], 0)).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    // per-user refuses: login takes nothing.
    for _ in 0..3 {
        let r = h.rls(request("edge", vec![ip(), user()], 0)).await;
        assert_eq!(r.overall_code, Code::OverLimit as i32);
        assert_eq!(r.statuses[0].code, Code::Ok as i32);
    }
    let r = h.rls(request("edge", vec![ip()], 0)).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 1);
    h.running.stop().await;
}

#[test]
fn a_ban_on_a_key_every_client_shares_is_refused_at_load() {
    let shared = LIMITS.replace(
        "[{ key = \"path\", value = \"/login\" }, { key = \"remote_address\" }]",
        "[{ key = \"path\", value = \"/login\" }]",
    );
    let err = Config::parse(&shared, "ban.toml", token_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ban.toml:8: limit \"login\": ban = \"1h\" on descriptors whose entries all have fixed values"),
        "{err}"
    );
    let unlimited = LIMITS.replace("algorithm = \"fixed-window 2/1m\"", "unlimited = true");
    let err = Config::parse(&unlimited, "ban.toml", token_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("on an unlimited limit"), "{err}");
    let bad = LIMITS.replace("ban = \"1h\"", "ban = \"1 fortnight\"");
    let err = Config::parse(&bad, "ban.toml", token_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ban.toml:8: limit \"login\": ban = \"1 fortnight\""),
        "{err}"
    );
}

#[test]
fn a_reload_that_changes_a_ban_is_refused() {
    let config = Config::parse(LIMITS, "ban.toml", token_env).unwrap();
    let state = ratelimit_server::State::new(&config).unwrap();
    let longer = LIMITS.replace("ban = \"1h\"", "ban = \"2h\"");
    let err = state
        .reload(&Config::parse(&longer, "ban.toml", token_env).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ban.toml:8: limit \"login\": ban changed"),
        "{err}"
    );
}

#[tokio::test]
async fn a_cost_that_can_never_fit_begins_no_ban() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::parse(LIMITS, "ban.toml", token_env).unwrap();
    let h = Harness::start_config(config, clock.clone()).await;
    let ip = "203.0.113.40";
    let huge = descriptor(&[("path", "/login"), ("remote_address", ip)], Some(3));
    for _ in 0..3 {
        let r = h.rls(request("edge", vec![huge.clone()], 0)).await;
        assert_eq!(r.overall_code, Code::OverLimit as i32);
        assert_eq!(retry_after(&r), None);
        // Not the ban's hour: the window's minute (the key is full).
        assert_eq!(until_reset(&r), 60);
    }
    // Not an offence: the client still has its 2.
    for _ in 0..2 {
        assert_eq!(login(&h, ip).await.overall_code, Code::Ok as i32);
    }
    h.running.stop().await;
}
