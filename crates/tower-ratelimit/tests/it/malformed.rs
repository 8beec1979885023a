//! Malformed headers never produce a 5xx or a panic: a 4xx, or pass-through.

use crate::common::*;
use axum::routing::get;
use axum::Router;
use proptest::prelude::*;
use ratelimit_core::{Gcra, MemoryStore};
use tower::ServiceExt;
use tower_ratelimit::key::{ApiKey, Bearer, ClientIp, KeyExtractor, ProxyHeader};
use tower_ratelimit::strategy::KeyErrorPolicy;
use tower_ratelimit::RateLimitLayer;

fn layered<X>(key: X, policy: KeyErrorPolicy) -> Router
where
    X: KeyExtractor,
    X::Key: std::hash::Hash + Eq + Clone + ratelimit_core::algorithm::StableKey,
{
    let layer = RateLimitLayer::builder(key)
        .limit("l", MemoryStore::new(Gcra::new(1000, SEC).unwrap()))
        .on_key_error(policy)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

fn apps() -> Vec<(&'static str, Router)> {
    let trusted = || ClientIp::new(["10.0.0.0/8", "::1"]).unwrap();
    let mut apps = Vec::new();
    for policy in [
        KeyErrorPolicy::Reject,
        KeyErrorPolicy::Allow,
        KeyErrorPolicy::AllowMissing,
    ] {
        apps.push(("authorization", layered(Bearer::new(), policy)));
        apps.push(("x-forwarded-for", layered(trusted(), policy)));
        apps.push((
            "forwarded",
            layered(trusted().header(ProxyHeader::Forwarded), policy),
        ));
        apps.push(("x-api-key", layered(ApiKey::new(), policy)));
        apps.push((
            "x-real-ip",
            layered(trusted().header(ProxyHeader::X_REAL_IP), policy),
        ));
    }
    apps
}

async fn probe(apps: &[(&'static str, Router)], value: &[u8]) {
    for (header, app) in apps {
        let req = get_from("10.0.0.1:1", "/", &[(header, value)]);
        let res = app.clone().oneshot(req).await.unwrap();
        let s = res.status().as_u16();
        assert!(
            s == 200 || (400..500).contains(&s),
            "{header}: {value:?} -> {s}"
        );
    }
}

#[tokio::test]
async fn known_bad_values() {
    let apps = apps();
    let values: &[&[u8]] = &[
        b"",
        b" ",
        b",",
        b",,,",
        b"\xff\xfe\xfd",
        b"Bearer",
        b"Bearer \xc3\x28",
        b"bearer ====",
        b"Basic Zm9vOmJhcg==",
        b"for=",
        b"for=\"",
        b"for=\"[::1\"",
        b"for=unknown",
        b"for=_x;by=y",
        b"1.2.3.4:99999",
        b"[::1]:",
        b"::ffff:999.1.1.1",
        b"\"quoted\"",
        b"\t\t",
        b"a=b;c=d, e",
        &[b'x'; 8000],
    ];
    for v in values {
        probe(&apps, v).await;
    }
}

fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    // Every byte a header value may hold: tab, visible ASCII, obs-text.
    let byte = prop_oneof![
        Just(b'\t'),
        0x20u8..0x7f,
        0x80u8..=0xff,
        Just(b','),
        Just(b';'),
        Just(b'"'),
        Just(b'=')
    ];
    proptest::collection::vec(byte, 0..64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_header_bytes_never_5xx(value in header_bytes(), prefix in prop_oneof![Just(&b""[..]), Just(&b"Bearer "[..]), Just(&b"for="[..]), Just(&b"1.2.3.4, "[..])]) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let apps = apps();
        let mut v = prefix.to_vec();
        v.extend_from_slice(&value);
        rt.block_on(probe(&apps, &v));
    }
}

#[tokio::test]
async fn bearer_errors_follow_rfc_6750() {
    let app = layered(Bearer::new(), KeyErrorPolicy::Reject);
    let send = |values: &[&'static [u8]]| {
        let headers: Vec<(&str, &[u8])> = values.iter().map(|v| ("authorization", *v)).collect();
        app.clone().oneshot(get_from("10.0.0.1:1", "/", &headers))
    };
    // Missing: 401 with a bare challenge.
    for values in [&[][..], &[&b"Basic Zm9vOmJhcg=="[..]], &[b"Bearer "]] {
        let res = send(values).await.unwrap();
        assert_eq!(res.status(), 401, "{values:?}");
        assert_eq!(res.headers()["www-authenticate"], "Bearer");
    }
    // Malformed: 400 with error="invalid_request" (RFC 6750, 3.1).
    let long: &'static [u8] = format!("Bearer {}", "a".repeat(4097)).leak().as_bytes();
    for values in [
        &[&b"Bearer a b"[..]][..],
        &[b"Bearer \xff"],
        &[b"Bearer ok", b"Bearer ok2"],
        &[long],
    ] {
        let res = send(values).await.unwrap();
        assert_eq!(res.status(), 400, "{values:?}");
        assert_eq!(
            res.headers()["www-authenticate"],
            "Bearer error=\"invalid_request\""
        );
    }
    assert_eq!(send(&[b"Bearer ok"]).await.unwrap().status(), 200);
}
