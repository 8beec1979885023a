//! Limits over address prefixes in code: one layer per prefix length, the
//! client's address and its network each held to their own limit.

use crate::common::{get_from, Hits};
use axum::routing::get;
use axum::Router;
use ratelimit_core::{ManualClock, MemoryStore, SlidingLog};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{ClientIp, IpPrefixes, KeyExtractor, PeerIp};
use tower_ratelimit::{LayerBuildError, RateLimitLayer};

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_host_limit_and_a_site_limit_through_x_forwarded_for() {
    let clock = ManualClock::new();
    let per_host = ClientIp::new(["10.0.0.0/8"]).unwrap();
    let per_site = per_host.clone().prefixes(IpPrefixes::SITE);
    let hits = Hits::default();
    let h = hits.clone();
    let limit = |n| MemoryStore::new(SlidingLog::new(n, HOUR).unwrap());
    let site = RateLimitLayer::builder(per_site)
        .limit("site", limit(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    // Outermost: what the site limit refuses is given back here.
    let host = RateLimitLayer::builder(per_host)
        .limit("host", limit(3))
        .clock(clock.clone())
        .refund_on_inner_limit()
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(move || async move { h.hit() }))
        .layer(site)
        .layer(host);
    let send = |xff: String| {
        let req = get_from("10.0.0.1:1", "/", &[("x-forwarded-for", xff.as_bytes())]);
        app.clone().oneshot(req)
    };
    // 100 /64s of one /48, 100 addresses of one /24: 10 each.
    for i in 0..100u32 {
        send(format!("2001:db8:7:{i:x}::{i:x}")).await.unwrap();
    }
    assert_eq!(hits.get(), 10);
    for i in 0..100u32 {
        send(format!("203.0.113.{i}")).await.unwrap();
    }
    assert_eq!(hits.get(), 20);
    // The host limit alone: one /64, 3.
    for i in 0..6 {
        send(format!("2001:db8:9::{i}")).await.unwrap();
    }
    assert_eq!(hits.get(), 23);
    // A /64 the full /48 refused, half an hour in: when the /48's
    // requests expire, it still has its 3.
    clock.advance(HOUR / 2);
    for _ in 0..3 {
        send("2001:db8:7:ffff::1".to_owned()).await.unwrap();
    }
    assert_eq!(hits.get(), 23);
    clock.advance(HOUR / 2);
    for _ in 0..5 {
        send("2001:db8:7:ffff::1".to_owned()).await.unwrap();
    }
    assert_eq!(hits.get(), 26);
}

#[test]
fn prefix_lengths_are_checked_when_set() {
    let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
    assert_eq!(
        c.clone().ipv6_prefix(129).unwrap_err(),
        LayerBuildError::BadPrefix {
            family: "IPv6",
            prefix: 129
        }
    );
    assert!(c.clone().ipv4_prefix(0).is_err());
    let c = c.ipv4_prefix(24).unwrap().ipv6_prefix(48).unwrap();
    assert_eq!(c.key_prefixes(), IpPrefixes::SITE);
    let req = get_from("[2001:db8:7:1::9]:1", "/", &[]).into_parts().0;
    let key = PeerIp::new()
        .prefixes(IpPrefixes::SITE)
        .extract(&req)
        .unwrap();
    assert_eq!(key.to_string(), "2001:db8:7::/48");
}
