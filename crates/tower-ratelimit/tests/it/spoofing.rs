//! Clients cannot escape their limit by forging headers or rotating addresses.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{Gcra, MemoryStore};
use tower::ServiceExt;
use tower_ratelimit::key::{ClientIp, KeyExtractor, PeerIp, ProxyHeader};
use tower_ratelimit::RateLimitLayer;

fn app<X>(key: X) -> Router
where
    X: KeyExtractor,
    X::Key: std::hash::Hash + Eq + Clone + ratelimit_core::algorithm::StableKey,
{
    let store = MemoryStore::new(Gcra::new(1, 3600 * SEC).unwrap());
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(store, key))
}

async fn code(app: &Router, peer: &str, headers: &[(&str, &[u8])]) -> u16 {
    let res = app
        .clone()
        .oneshot(get_from(peer, "/", headers))
        .await
        .unwrap();
    res.status().as_u16()
}

#[tokio::test]
async fn forged_leftmost_xff_entries_change_nothing() {
    let app = app(ClientIp::new(["10.0.0.0/8"]).unwrap());
    let proxy = "10.0.0.1:443";
    assert_eq!(
        code(&app, proxy, &[("x-forwarded-for", b"1.1.1.1, 203.0.113.7")]).await,
        200
    );
    for forged in [
        &b"2.2.2.2, 203.0.113.7"[..],
        b"3.3.3.3,4.4.4.4, 203.0.113.7",
        b"garbage, 203.0.113.7",
    ] {
        assert_eq!(code(&app, proxy, &[("x-forwarded-for", forged)]).await, 429);
    }
    // A forged header line before the proxy's own counts as leftmost too.
    assert_eq!(
        code(
            &app,
            proxy,
            &[
                ("x-forwarded-for", b"9.9.9.9"),
                ("x-forwarded-for", b"203.0.113.7")
            ]
        )
        .await,
        429
    );
    // Another client behind the proxy has its own limit.
    assert_eq!(
        code(&app, proxy, &[("x-forwarded-for", b"1.1.1.1, 203.0.113.8")]).await,
        200
    );
}

#[tokio::test]
async fn non_ascii_bytes_left_of_the_client_change_nothing() {
    let app = app(ClientIp::new(["10.0.0.0/8"]).unwrap());
    let proxy = "10.0.0.1:443";
    let xff = |v: &'static [u8]| [("x-forwarded-for", v)];
    assert_eq!(code(&app, proxy, &xff(b"203.0.113.7")).await, 200);
    for forged in [
        &b"caf\xc3\xa9, 203.0.113.7"[..],
        b"\xff\xfe\x80,203.0.113.7",
    ] {
        assert_eq!(code(&app, proxy, &xff(forged)).await, 429, "{forged:?}");
    }
}

#[tokio::test]
async fn forged_xff_ignored_when_x_real_ip_is_configured() {
    let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
    let app = app(c.header(ProxyHeader::X_REAL_IP));
    let proxy = "10.0.0.1:443";
    let real =
        |ip: &'static [u8], xff: &'static [u8]| [("x-real-ip", ip), ("x-forwarded-for", xff)];
    assert_eq!(
        code(&app, proxy, &real(b"203.0.113.7", b"1.1.1.1")).await,
        200
    );
    for forged in [&b"2.2.2.2"[..], b"203.0.113.8", b"\xff"] {
        assert_eq!(code(&app, proxy, &real(b"203.0.113.7", forged)).await, 429);
    }
    assert_eq!(
        code(&app, proxy, &real(b"203.0.113.8", b"203.0.113.7")).await,
        200
    );
}

#[tokio::test]
async fn headers_from_untrusted_peers_are_ignored() {
    let app = app(ClientIp::new(["10.0.0.0/8"]).unwrap());
    let peer = "198.51.100.9:5000";
    assert_eq!(
        code(&app, peer, &[("x-forwarded-for", b"1.1.1.1")]).await,
        200
    );
    for forged in [&b"2.2.2.2"[..], b"10.0.0.5", b"3.3.3.3, 4.4.4.4"] {
        assert_eq!(code(&app, peer, &[("x-forwarded-for", forged)]).await, 429);
        assert_eq!(
            code(&app, peer, &[("forwarded", b"for=5.5.5.5")]).await,
            429
        );
    }
    // Without trusted proxies at all, headers never matter.
    let app = app_no_proxies();
    assert_eq!(
        code(&app, "10.0.0.1:1", &[("x-forwarded-for", b"1.1.1.1")]).await,
        200
    );
    assert_eq!(
        code(&app, "10.0.0.1:1", &[("x-forwarded-for", b"2.2.2.2")]).await,
        429
    );
}

fn app_no_proxies() -> Router {
    app("".parse::<ClientIp>().unwrap())
}

#[tokio::test]
async fn ipv6_addresses_in_one_64_share_a_limit() {
    for app in [app(PeerIp::new()), app("".parse::<ClientIp>().unwrap())] {
        assert_eq!(code(&app, "[2001:db8:aa:bb::1]:1", &[]).await, 200);
        for rotated in [
            "[2001:db8:aa:bb::2]:1",
            "[2001:db8:aa:bb:ffff:ffff:ffff:ffff]:9",
            "[2001:db8:aa:bb:1234::]:2",
        ] {
            assert_eq!(code(&app, rotated, &[]).await, 429, "{rotated}");
        }
        assert_eq!(code(&app, "[2001:db8:aa:bc::1]:1", &[]).await, 200);
    }
    // A /48 prefix groups wider.
    let wide = app(PeerIp::new().ipv6_prefix(48).unwrap());
    assert_eq!(code(&wide, "[2001:db8:aa:1::1]:1", &[]).await, 200);
    assert_eq!(code(&wide, "[2001:db8:aa:2::1]:1", &[]).await, 429);
}

#[tokio::test]
async fn ipv4_mapped_addresses_are_ipv4() {
    let app = app(PeerIp::new());
    assert_eq!(code(&app, "192.0.2.5:1", &[]).await, 200);
    assert_eq!(code(&app, "[::ffff:192.0.2.5]:1", &[]).await, 429);
    // A mapped trusted proxy is still trusted.
    let app = self::app(ClientIp::new(["10.0.0.0/8"]).unwrap());
    assert_eq!(
        code(
            &app,
            "[::ffff:10.0.0.1]:1",
            &[("x-forwarded-for", b"192.0.2.6")]
        )
        .await,
        200
    );
    assert_eq!(
        code(
            &app,
            "10.0.0.2:1",
            &[("x-forwarded-for", b"::ffff:192.0.2.6")]
        )
        .await,
        429
    );
}

/// Proxy settings that look wrong are warned of once, from the first
/// requests: a forwarding header with no proxy trusted, every request from
/// one private address with no proxy trusted, and a header from a peer
/// missing from the trusted list. Ranges holding public addresses are told
/// at startup by `public_trusted`.
#[tokio::test(flavor = "current_thread")]
async fn proxy_settings_that_look_wrong_are_warned_of_once() {
    let (out, _guard) = capture_warnings();
    let lone = app(ClientIp::default());
    for _ in 0..150 {
        code(
            &lone,
            "127.0.0.1:5000",
            &[("x-forwarded-for", b"203.0.113.7")],
        )
        .await;
    }
    let text = out.text();
    assert_eq!(text.matches("but no proxy is trusted").count(), 1, "{text}");
    assert_eq!(
        text.matches("all came from one private address").count(),
        1,
        "{text}"
    );

    let (out, _guard) = capture_warnings();
    let listed = app(ClientIp::new(["10.0.0.0/8"]).unwrap());
    for i in 0..150 {
        let peer = format!("198.51.100.{}:5000", i % 50);
        code(&listed, &peer, &[("x-forwarded-for", b"203.0.113.7")]).await;
    }
    let text = out.text();
    assert_eq!(
        text.matches("from a peer that is not a trusted proxy")
            .count(),
        1,
        "{text}"
    );
    assert!(!text.contains("one private address"), "{text}");

    // Many clients, no header: nothing to say.
    let (out, _guard) = capture_warnings();
    let direct = app(ClientIp::default());
    for i in 0..150 {
        code(&direct, &format!("198.51.100.{}:5000", i % 50), &[]).await;
    }
    assert_eq!(out.text(), "");

    let wide = "10.0.0.0/8, 0.0.0.0/0, 203.0.113.0/24, ::1, fd00::/8"
        .parse::<ClientIp>()
        .unwrap();
    let public: Vec<String> = wide
        .public_trusted()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(public, ["0.0.0.0/0", "203.0.113.0/24"]);
}
