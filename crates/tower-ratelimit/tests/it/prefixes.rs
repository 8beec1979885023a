//! Limits over address prefixes in code: one layer per prefix length, the
//! client's address and its network each held to their own limit.

use crate::common::{get_from, Hits};
use axum::routing::get;
use axum::Router;
use ratelimit_core::{ManualClock, MemoryStore, SlidingLog};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{ClientIp, IpPrefixes, PeerIp};
use tower_ratelimit::{BuildError, RateLimitLayer};

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_host_limit_and_a_site_limit_through_x_forwarded_for() {
    let clock = ManualClock::new();
    let per_host = ClientIp::new(["10.0.0.0/8"]).unwrap();
    let per_site = per_host.clone().prefixes(IpPrefixes::SITE);
    let hits = Hits::default();
    let h = hits.clone();
    let layer = |extractor: ClientIp, limit| {
        RateLimitLayer::builder(extractor)
            .limit("x", MemoryStore::new(SlidingLog::new(limit, HOUR).unwrap()))
            .clock(clock.clone())
            .refund_on_inner_limit()
            .build()
            .unwrap()
    };
    let app = Router::new()
        .route("/", get(move || async move { h.hit() }))
        .layer(layer(per_site, 10))
        .layer(layer(per_host, 3));
    let send = |xff: String| {
        let req = get_from("10.0.0.1:1", "/", &[("x-forwarded-for", xff.as_bytes())]);
        app.clone().oneshot(req)
    };
    for i in 0..100u32 {
        send(format!("2001:db8:7:{i:x}::{i:x}")).await.unwrap();
    }
    assert_eq!(hits.get(), 10);
    for i in 0..100u32 {
        send(format!("203.0.113.{}", i % 256)).await.unwrap();
    }
    assert_eq!(hits.get(), 20);
    // The host limit alone: one /64, 3.
    send("2001:db8:9::1".to_owned()).await.unwrap();
    for _ in 0..5 {
        send("2001:db8:9::2".to_owned()).await.unwrap();
    }
    assert_eq!(hits.get(), 23);
}

#[test]
fn prefix_lengths_are_checked_when_set() {
    let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
    assert_eq!(
        c.clone().ipv6_prefix(129).unwrap_err(),
        BuildError::BadPrefix {
            family: "IPv6",
            prefix: 129
        }
    );
    assert!(c.clone().ipv4_prefix(0).is_err());
    let c = c.ipv4_prefix(24).unwrap().ipv6_prefix(48).unwrap();
    assert_eq!(c.key_prefixes(), IpPrefixes::SITE);
    let p = PeerIp::new().prefixes(IpPrefixes::SITE);
    let _ = p;
}
