//! The layer's upkeep task gives a key flood's memory back with no request
//! arriving.

use crate::common::get_from;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{Gcra, ManualClock, MemoryStore};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::RateLimitLayer;

#[tokio::test(start_paused = true)]
async fn idle_stores_are_swept_every_second() {
    let clock = ManualClock::new();
    let store = Arc::new(MemoryStore::new(
        Gcra::new(10, Duration::from_secs(1)).unwrap(),
    ));
    let layer =
        RateLimitLayer::<_, MemoryStore<Gcra, tower_ratelimit::key::IpKey>>::builder(PeerIp::new())
            .limit("flood", Arc::clone(&store))
            .clock(clock.clone())
            .build()
            .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    for i in 0..5_000u32 {
        let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
        let res = app
            .clone()
            .oneshot(get_from(&format!("{ip}:1"), "/", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(store.len(), 5_000);
    // Within the period nothing is full: the upkeep keeps every key.
    clock.advance(Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(store.len(), 5_000);
    // Past it, the next upkeep tick drops them all.
    clock.advance(Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.len(), 0);
}
