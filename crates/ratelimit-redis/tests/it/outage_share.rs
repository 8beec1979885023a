//! The outage share: instances count each other through Redis, and while
//! Redis is away each fallback admits its share of a limit, so the fleet
//! admits about the limit, not the limit per instance.

use crate::server;
use ratelimit_core::{SlidingLog, Store};
use ratelimit_redis::{RedisStore, TimeSource, INSTANCE_ANNOUNCE_EVERY};
use std::time::{Duration, Instant};

/// A real epoch time, for the caller's clock.
const T0: u64 = 1_700_000_000_123_456_789;

fn store(url: &str, limit: u64, share: bool) -> RedisStore {
    RedisStore::builder(
        url,
        SlidingLog::new(limit, Duration::from_secs(3600)).unwrap(),
    )
    .prefix("share:")
    .time_source(TimeSource::Caller)
    .timeout(Duration::from_millis(100))
    .fallback_to_memory(100)
    .outage_share(share)
    .build()
    .unwrap()
}

/// Waits (at most 20 s) until every store has counted `k` instances.
pub(crate) async fn until_counted(stores: &[RedisStore], k: u64) {
    let start = Instant::now();
    while stores.iter().any(|s| s.instances() != k) {
        let seen: Vec<u64> = stores.iter().map(RedisStore::instances).collect();
        assert!(start.elapsed() < Duration::from_secs(20), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many of `tries` cost-1 checks of `key` each store admits.
async fn admitted(stores: &[RedisStore], key: &str, tries: u64, now: u64) -> Vec<u64> {
    let mut each = Vec::new();
    for s in stores {
        let mut n = 0;
        for _ in 0..tries {
            n += u64::from(Store::<str>::check(s, key, 1, now).await.unwrap().allowed);
        }
        each.push(n);
    }
    each
}

/// Four instances of a limit of 10 (one with sharing off) and three of a
/// limit of 2 on one Redis count each other (4 and 3), and keep the count
/// through a pause of Redis (SIGSTOP) longer than an announcement; in the
/// pause each sharing one admits its share: 2 of 10 (`floor(L / k)`, 8
/// for 4, at most `L`), and 1 of 2 (`L < k`: one each, 3 in all, `max(L,
/// k)`). The one with sharing off admits the whole limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_admit_about_the_limit_while_redis_is_paused() {
    let server = server!();
    let url = server.url();
    let tens: Vec<RedisStore> = (0..3).map(|_| store(&url, 10, true)).collect();
    let twos: Vec<RedisStore> = (0..3).map(|_| store(&url, 2, true)).collect();
    let whole = store(&url, 10, false);
    for s in tens.iter().chain(&twos).chain([&whole]) {
        crate::harness::again(|| s.ping()).await;
    }
    // The whole-limit one is counted too: 4 stores of 10.
    until_counted(&tens, 4).await;
    until_counted(&twos, 3).await;
    assert_eq!(whole.instances(), 4);
    server.signal("STOP");
    tokio::time::sleep(INSTANCE_ANNOUNCE_EVERY * 2).await;
    let first = Store::<str>::check(&tens[0], "probe", 1, T0).await.unwrap();
    assert!(first.allowed);
    assert_eq!(
        first.remaining, 1,
        "2 of the share of 10 / 4, in calls: {first:?}"
    );
    let tens_each = admitted(&tens, "k", 10, T0).await;
    let twos_each = admitted(&twos, "k", 10, T0).await;
    let whole_each = admitted(std::slice::from_ref(&whole), "k", 12, T0).await;
    server.signal("CONT");
    assert_eq!(tens_each, [2, 2, 2], "floor(10 / 4) each");
    assert_eq!(twos_each, [1, 1, 1], "at least one each");
    assert_eq!(whole_each, [10], "sharing off: the whole limit");
    // Still counted through the pause.
    assert!(tens.iter().all(|s| s.instances() == 4));
}
