//! `[admin]`: a bearer token from the environment or a file, never the configuration; reset, ban, unban and peek a key; JSON errors, never a 500.

use crate::harness::{Answer, Harness};
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use std::sync::Arc;
use tower_ratelimit::deploy::WRONG_TOKENS_PER_SOURCE;

const TOKEN: &str = "test-admin-token-0123456789";

/// An environment of `ADMIN_TOKEN` = [`TOKEN`] only.
fn token_env(var: &str) -> Option<String> {
    (var == "ADMIN_TOKEN").then(|| TOKEN.to_owned())
}

const LIMITS: &str = r#"
[admin]
address = "127.0.0.1:9091"

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 2/1h"
descriptors = [{ key = "remote_address" }]

[[limit]]
name = "office"
domain = "edge"
unlimited = true
descriptors = [{ key = "remote_address", value = "192.0.2.10" }]
"#;

async fn start() -> Harness {
    let config = Config::parse(LIMITS, "admin.toml", token_env).unwrap();
    Harness::start_config(config, Arc::new(SystemClock::new())).await
}

/// An admin call with the token.
async fn admin(h: &Harness, method: &str, path: &str, body: &str) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    h.http_at(
        h.running.admin_addr,
        method,
        path,
        &[("authorization", &auth)],
        body,
    )
    .await
}

async fn check(h: &Harness, ip: &str) -> u16 {
    let body = format!(r#"{{"limit":"per-ip","key":"{ip}"}}"#);
    h.http("POST", "/check", &[], &body).await.status
}

fn is_json_error(a: &Answer) -> bool {
    let json = a
        .headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    json && a.body.starts_with("{\"error\":")
}

#[tokio::test]
async fn reset_ban_unban_and_peek_a_key() {
    let h = start().await;
    let ip = "10.7.0.1";
    assert_eq!((check(&h, ip).await, check(&h, ip).await), (200, 200));
    assert_eq!(check(&h, ip).await, 429);
    let a = admin(&h, "GET", &format!("/limits/per-ip/keys/{ip}"), "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("\"remaining\":0"), "{}", a.body);
    assert!(a.body.contains("\"banned_secs\":null"), "{}", a.body);
    let a = admin(&h, "DELETE", &format!("/limits/per-ip/keys/{ip}"), "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(check(&h, ip).await, 200);
    let a = admin(
        &h,
        "PUT",
        &format!("/limits/per-ip/bans/{ip}"),
        r#"{"for":"1h"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(check(&h, ip).await, 429);
    let a = admin(&h, "GET", &format!("/limits/per-ip/keys/{ip}"), "").await;
    assert!(a.body.contains("\"banned_secs\":3600"), "{}", a.body);
    let a = admin(&h, "DELETE", &format!("/limits/per-ip/bans/{ip}"), "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!((check(&h, ip).await, check(&h, ip).await), (200, 200));
    let a = admin(&h, "GET", "/limits", "").await;
    assert!(a.body.contains("\"name\":\"per-ip\""), "{}", a.body);
    h.running.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_json_error_never_a_500() {
    let h = start().await;
    let long = "k".repeat(600);
    let cases: [(&str, String, &str, u16); 8] = [
        ("GET", "/limits/nothing/keys/k".into(), "", 404),
        ("GET", "/limits/office/keys/192.0.2.10".into(), "", 400),
        ("GET", format!("/limits/per-ip/keys/{long}"), "", 400),
        ("PUT", "/limits/per-ip/bans/k".into(), "not json", 400),
        (
            "PUT",
            "/limits/per-ip/bans/k".into(),
            r#"{"for":"1 fortnight"}"#,
            400,
        ),
        (
            "PUT",
            "/limits/per-ip/bans/k".into(),
            r#"{"for":"400d"}"#,
            400,
        ),
        ("POST", "/limits".into(), "", 405),
        ("GET", "/nowhere".into(), "", 404),
    ];
    for (method, path, body, want) in cases {
        let a = admin(&h, method, &path, body).await;
        assert_eq!(a.status, want, "{method} {path}: {}", a.body);
        assert!(
            is_json_error(&a),
            "{method} {path}: {:?} {}",
            a.headers,
            a.body
        );
    }
    h.running.stop().await;
}

#[tokio::test]
async fn a_wrong_token_is_401_and_too_many_are_429() {
    let h = start().await;
    let at = h.running.admin_addr;
    let a = h.http_at(at, "GET", "/limits", &[], "").await;
    assert_eq!(a.status, 401);
    assert!(is_json_error(&a), "{}", a.body);
    assert!(a.headers.contains_key("www-authenticate"));
    let wrong = [("authorization", "Bearer test-admin-token-012345678X")];
    for _ in 1..WRONG_TOKENS_PER_SOURCE {
        assert_eq!(
            h.http_at(at, "GET", "/limits", &wrong, "").await.status,
            401
        );
    }
    let a = h.http_at(at, "GET", "/limits", &wrong, "").await;
    assert_eq!(a.status, 429, "{}", a.body);
    assert!(a.headers.contains_key("retry-after"));
    // Even the right token waits: the source's failures are spent.
    assert_eq!(admin(&h, "GET", "/limits", "").await.status, 429);
    h.running.stop().await;
}

#[test]
fn the_token_comes_from_the_environment_or_a_file_never_the_configuration() {
    let err = Config::parse(
        "[admin]\ntoken = \"hunter2hunter2hunter2\"",
        "a.toml",
        |_| None,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("[admin] token:"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    // On without a token: refused at load.
    let err = Config::parse(LIMITS, "a.toml", |_| None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("without a token"), "{err}");
    // A file, then the environment over it.
    let dir = std::env::temp_dir().join(format!("ratelimitd-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let text = format!("{LIMITS}\n").replace(
        "address = \"127.0.0.1:9091\"",
        &format!(
            "address = \"127.0.0.1:9091\"\ntoken-file = {:?}",
            file.display().to_string()
        ),
    );
    let token = |config: Config| config.deployment.admin.unwrap().token;
    let config = Config::parse(&text, "a.toml", |_| None).unwrap();
    assert!(token(config).matches(TOKEN));
    let env = |v: &str| (v == "ADMIN_TOKEN").then(|| "another-token-from-env".to_owned());
    let config = Config::parse(&text, "a.toml", env).unwrap();
    assert!(token(config).matches("another-token-from-env"));
    let short = |v: &str| (v == "ADMIN_TOKEN").then(|| "short".to_owned());
    assert!(Config::parse(&text, "a.toml", short).is_err());
    // ADMIN_ADDR turns it on.
    let env = |v: &str| match v {
        "ADMIN_ADDR" => Some("127.0.0.1:9300".to_owned()),
        "ADMIN_TOKEN" => Some(TOKEN.to_owned()),
        _ => None,
    };
    let config = Config::parse("", "a.toml", env).unwrap();
    assert_eq!(config.deployment.admin.unwrap().address.port(), 9300);
    let _ = std::fs::remove_dir_all(&dir);
}
