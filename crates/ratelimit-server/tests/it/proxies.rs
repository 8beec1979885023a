//! `[proxies]` for `GET /check`: the client's address from a trusted proxy's header (read from the right), the peer's from any other peer; a limit's `key-header` as sent.

use crate::harness::Harness;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use std::sync::Arc;

/// One check a client an hour, keyed on the client's address (`per-ip`)
/// or on an API key header (`per-key`), behind `trusted`.
fn limits(trusted: &str) -> String {
    format!(
        r#"
[proxies]
trusted = ["{trusted}"]
header = "x-forwarded-for"

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 1/1h"
descriptors = [{{ key = "remote_address" }}]

[[limit]]
name = "per-key"
domain = "edge"
algorithm = "fixed-window 1/1h"
descriptors = [{{ key = "api_key" }}]
key-header = "x-api-key"
"#
    )
}

async fn start(trusted: &str) -> Harness {
    let config = Config::parse(&limits(trusted), "proxies.toml", |_| None).unwrap();
    Harness::start_config(config, Arc::new(SystemClock::new())).await
}

async fn get(h: &Harness, limit: &str, headers: &[(&str, &str)]) -> u16 {
    let path = format!("/check?limit={limit}");
    h.http("GET", &path, headers, "").await.status
}

/// What a peek of `per-ip` for `key` says is left.
async fn left(h: &Harness, key: &str) -> String {
    let body = format!(r#"{{"limit":"per-ip","key":"{key}","cost":0}}"#);
    let a = h.http("POST", "/check", &[], &body).await;
    let after = a.body.split("\"remaining\":").nth(1).expect("a remaining");
    after[..after.find(',').unwrap()].to_owned()
}

#[tokio::test]
async fn a_trusted_proxys_header_names_the_client() {
    // The tests' client is on loopback: the trusted proxy.
    let h = start("127.0.0.1").await;
    let xff = |v| [("x-forwarded-for", v)];
    assert_eq!(get(&h, "per-ip", &xff("6.6.6.6, 203.0.113.9")).await, 204);
    assert_eq!(left(&h, "203.0.113.9").await, "0");
    assert_eq!(left(&h, "6.6.6.6").await, "1");
    // A forged leftmost entry changes nothing: the same client.
    assert_eq!(get(&h, "per-ip", &xff("1.2.3.4, 203.0.113.9")).await, 429);
    assert_eq!(get(&h, "per-ip", &xff("203.0.113.10")).await, 204);
    // X-Real-IP is not the trusted header here: the peer's address.
    let real_ip = [("x-real-ip", "198.51.100.1")];
    assert_eq!(get(&h, "per-ip", &real_ip).await, 204);
    assert_eq!(left(&h, "127.0.0.1").await, "0");
    assert_eq!(left(&h, "198.51.100.1").await, "1");
    // A malformed header is a 400 naming it.
    let a = h
        .http("GET", "/check?limit=per-ip", &xff("not an address"), "")
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("X-Forwarded-For"), "{}", a.body);
    // A key-header is read as sent.
    let key = [("x-api-key", "tenant-7")];
    assert_eq!(get(&h, "per-key", &key).await, 204);
    assert_eq!(get(&h, "per-key", &key).await, 429);
    h.running.stop().await;
}

#[tokio::test]
async fn an_untrusted_peers_header_is_ignored() {
    let h = start("10.0.0.0/8").await;
    let xff = |v| [("x-forwarded-for", v)];
    assert_eq!(get(&h, "per-ip", &xff("203.0.113.20")).await, 204);
    // Another claimed client, the same peer: refused.
    assert_eq!(get(&h, "per-ip", &xff("203.0.113.21")).await, 429);
    assert_eq!(left(&h, "127.0.0.1").await, "0");
    assert_eq!(left(&h, "203.0.113.20").await, "1");
    h.running.stop().await;
}

#[test]
fn trusted_proxies_come_from_the_environment_too() {
    let env = |v: &str| match v {
        "TRUSTED_PROXIES" => Some("10.1.0.0/16".to_owned()),
        "TRUSTED_PROXY_HEADER" => Some("x-real-ip".to_owned()),
        _ => None,
    };
    let config = Config::parse("", "p.toml", env).unwrap();
    let client_ip = config.deployment.client_ip.unwrap();
    assert!(client_ip.is_trusted("10.1.2.3".parse().unwrap()));
    let bad = |v: &str| (v == "TRUSTED_PROXIES").then(|| "10.0.0.0/99".to_owned());
    let err = Config::parse("", "p.toml", bad).unwrap_err().to_string();
    assert!(err.contains("TRUSTED_PROXIES"), "{err}");
}

/// `per-ip` behind a trusted proxy on loopback that sets X-Real-IP.
const REAL_IP: &str = r#"
[proxies]
trusted = ["127.0.0.1"]
header = "x-real-ip"

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 1/1h"
descriptors = [{ key = "remote_address" }]
"#;

#[tokio::test]
async fn an_address_is_keyed_per_client_ipv6_by_its_64() {
    let config = Config::parse(REAL_IP, "real-ip.toml", |_| None).unwrap();
    let h = Harness::start_config(config, Arc::new(SystemClock::new())).await;
    let real_ip = |v| [("x-real-ip", v)];
    // One IPv6 client: its /64.
    assert_eq!(get(&h, "per-ip", &real_ip("2001:db8::1")).await, 204);
    assert_eq!(get(&h, "per-ip", &real_ip("2001:db8::2")).await, 429);
    assert_eq!(left(&h, "2001:db8::/64").await, "0");
    assert_eq!(get(&h, "per-ip", &real_ip("2001:db8:0:1::1")).await, 204);
    // IPv4: each address.
    assert_eq!(get(&h, "per-ip", &real_ip("192.0.2.1")).await, 204);
    assert_eq!(get(&h, "per-ip", &real_ip("192.0.2.2")).await, 204);
    assert_eq!(left(&h, "192.0.2.1").await, "0");
    // Not an address: 400, naming the header.
    let a = h
        .http("GET", "/check?limit=per-ip", &real_ip("alice"), "")
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.to_lowercase().contains("x-real-ip"), "{}", a.body);
    h.running.stop().await;
}

#[tokio::test]
async fn a_reload_of_proxies_is_logged_as_a_change() {
    let h = start("10.0.0.0/8").await;
    let xff = [("x-forwarded-for", "203.0.113.30")];
    let reloaded = h
        .reload(Config::parse(&limits("127.0.0.1"), "p.toml", |_| None).unwrap())
        .unwrap();
    assert_eq!(reloaded.settings, ["[proxies]"]);
    assert!(reloaded.changed.is_empty());
    // In force at once: the header of the now trusted peer names the client.
    assert_eq!(get(&h, "per-ip", &xff).await, 204);
    assert_eq!(left(&h, "203.0.113.30").await, "0");
    let again = h
        .reload(Config::parse(&limits("127.0.0.1"), "p.toml", |_| None).unwrap())
        .unwrap();
    assert!(again.settings.is_empty(), "{again:?}");
    h.running.stop().await;
}
