//! A ban through an outage: the instance that saw it refuses the key from
//! its in-memory fallback to the ban's end, a reset meanwhile (a
//! successful login) does not lift it, and it is written back when Redis
//! comes back empty (ALGORITHMS.md, "Bans").

use crate::ban::check;
use crate::harness::again;
use crate::server;
use ratelimit_core::{AnyAlgorithm, BanPolicy, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;
/// A real epoch time, on no whole second.
const T0: u64 = 1_700_000_000_123_456_789;
const HOUR: Duration = Duration::from_secs(3600);

/// An instance of the login limit: 5 failures an hour per IP, then a ban
/// of an hour; with the in-memory fallback or without.
fn store(url: &str, fallback: bool) -> RedisStore {
    let b = RedisStore::builder(url, "fixed-window 5/1h".parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_millis(500))
        .ban(Some(BanPolicy::new(HOUR).unwrap()));
    match fallback {
        true => b.fallback_to_memory(1_000),
        false => b,
    }
    .build()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_ban_holds_through_an_outage_and_a_reset() {
    let mut server = server!();
    let url = server.url();
    let (a, b) = (store(&url, true), store(&url, true));
    for _ in 0..5 {
        assert!(check(&a, "ip", T0).await.allowed);
    }
    assert!(check(&a, "ip", T0 + SEC).await.banned, "banned by Redis");
    // a reads the marker: its reference.
    assert_eq!(again(|| a.write_back(T0 + SEC)).await, 0);
    server.kill();

    // The fallback of the instance that saw the ban refuses the key.
    let d = check(&a, "ip", T0 + 2 * SEC).await;
    assert!(d.banned && !d.allowed, "{d:?}");
    assert_eq!(d.wait, Some(HOUR - Duration::from_secs(1)), "{d:?}");
    assert!(check(&a, "other", T0 + 2 * SEC).await.allowed, "it decides");
    // A successful login resets the key: Redis does not take it, and the
    // ban stays (a reset never ends a ban).
    let _ = Store::<str>::reset(&a, "ip").await;
    let d = check(&a, "ip", T0 + 3 * SEC).await;
    assert!(d.banned && !d.allowed, "{d:?}");
    // b never saw the ban: its fallback decides on the algorithm alone
    // (the bound ALGORITHMS.md states).
    assert!(check(&b, "ip", T0 + 3 * SEC).await.allowed);

    // Redis back, empty: a writes the ban back, to its end.
    server.restart();
    assert_eq!(again(|| a.write_back(T0 + 4 * SEC)).await, 1);
    let fresh = store(&url, false);
    let d = again(|| Store::<str>::check(&fresh, "ip", 1, T0 + 5 * SEC)).await;
    assert!(d.banned && !d.allowed, "{d:?}");
    assert_eq!(d.wait, Some(HOUR - Duration::from_secs(4)), "{d:?}");
}
