//! Reserve, then settle, on a real redis-server: every algorithm's
//! settlements (up into debt, down as refunds) decide exactly as the
//! in-memory store's, a debt reaches the local deny cache and outranks a
//! lease, the fallback settles while Redis is away, and 64 tasks on two
//! instances settling into one key lose no update.

use crate::harness::{round_trips, Client as _, Rng};
use crate::server;
use ratelimit_core::{AnyAlgorithm, Decision, MemoryStore, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const SPECS: [&str; 7] = [
    "gcra 5/1s",
    "gcra 3/2s burst 4",
    "token-bucket 6 refill 2/1s",
    "leaky-bucket 5/1s queue 3",
    "fixed-window 5/1s",
    "sliding-window 5/1s",
    "sliding-log 5/1s",
];

fn store(url: String, spec: &str, prefix: &str) -> RedisStore {
    RedisStore::builder(url, spec.parse::<AnyAlgorithm>().unwrap())
        .prefix(prefix)
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn settle(s: &RedisStore, key: &str, r: u64, a: u64, at: u64, now: u64) -> Decision {
    Store::<str>::settle(s, key, r, a, at, now).await.unwrap()
}

/// Random checks and settlements at epoch times: every Redis decision,
/// a settlement's included, equals the memory store's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlements_decide_as_in_memory() {
    let server = server!();
    for (i, spec) in SPECS.iter().enumerate() {
        let algorithm = spec.parse::<AnyAlgorithm>().unwrap();
        let redis = store(server.url(), spec, &format!("s{i}:"));
        let memory: MemoryStore<AnyAlgorithm, String> = MemoryStore::new(algorithm);
        let mut rng = Rng(0x5e77 ^ i as u64);
        let mut now = 1_700_000_000_123_456_789u64;
        let mut debts = 0;
        for op in 0..300 {
            now += match rng.below(4) {
                0 => 0,
                1 => rng.below(50_000_000),
                2 => rng.below(400_000_000),
                _ => rng.below(2_500_000_000),
            };
            let key = ["a", "b"][rng.below(2) as usize];
            let reserved = rng.below(4);
            let m = memory.check(key, reserved, now).value().unwrap();
            let r = Store::<str>::check(&redis, key, reserved, now)
                .await
                .unwrap();
            assert_eq!(r, m, "{spec} op {op}: check {reserved} at {now}");
            if !m.allowed {
                continue;
            }
            let actual = rng.below(12);
            let later = now + rng.below(30_000_000);
            let m = memory
                .settle(key, reserved, actual, now, later)
                .await
                .unwrap();
            let r = settle(&redis, key, reserved, actual, now, later).await;
            assert_eq!(
                r, m,
                "{spec} op {op}: settle {reserved} to {actual} at {later}"
            );
            debts += u32::from(!m.allowed);
            now = later;
        }
        if !spec.starts_with("leaky") {
            assert!(debts >= 5, "{spec}: only {debts} settlements into debt");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debt_reaches_the_deny_cache() {
    let server = server!();
    let s = store(server.url(), "gcra 10/1s", "d:");
    let now = 1_700_000_000_000_000_000;
    assert!(Store::<str>::check(&s, "k", 1, now).await.unwrap().allowed);
    let d = settle(&s, "k", 1, 15, now, now).await;
    assert!(!d.allowed);
    assert_eq!(d.wait, Some(Duration::from_millis(500)));
    let mut c = server.client().await;
    let before = round_trips(&mut c).await;
    // Answered locally: no round trip, the debt's wait and one T.
    let denied = Store::<str>::check(&s, "k", 1, now).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(600)));
    assert_eq!(round_trips(&mut c).await, before);
    // Repaid: admitted 600 ms on.
    let later = now + 600_000_000;
    assert!(
        Store::<str>::check(&s, "k", 1, later)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debt_outranks_a_lease() {
    let server = server!();
    let s = RedisStore::builder(server.url(), "gcra 100/1s".parse::<AnyAlgorithm>().unwrap())
        .prefix("l:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .lease(10, Duration::from_secs(60))
        .build()
        .unwrap();
    let now = 1_700_000_000_000_000_000;
    // Hot: the second check takes a lease of 10.
    for _ in 0..3 {
        assert!(Store::<str>::check(&s, "k", 1, now).await.unwrap().allowed);
    }
    let d = settle(&s, "k", 1, 150, now, now).await;
    assert!(!d.allowed, "{d:?}");
    let next = Store::<str>::check(&s, "k", 1, now).await.unwrap();
    assert!(!next.allowed, "a lease admitted a key in debt: {next:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_settles_while_redis_is_away() {
    let s = RedisStore::builder(
        "redis://127.0.0.1:1/",
        "gcra 10/1s".parse::<AnyAlgorithm>().unwrap(),
    )
    .timeout(Duration::from_millis(50))
    .fallback_to_memory(100)
    .build()
    .unwrap();
    assert!(Store::<str>::check(&s, "k", 1, 0).await.unwrap().allowed);
    let d = settle(&s, "k", 1, 12, 0, 0).await;
    assert!(!d.allowed, "{d:?}");
    assert!(!Store::<str>::check(&s, "k", 1, 0).await.unwrap().allowed);
}

/// 64 tasks on two instances reserve and settle into one key: the key
/// ends up having used exactly what the settlements said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_settle_without_a_lost_update() {
    let server = server!();
    // T = 1 ms: a peek's `reset` is the use in ms.
    let spec = "gcra 1000/1s burst 3000";
    let a = store(server.url(), spec, "c:");
    let b = store(server.url(), spec, "c:");
    let now = 1_700_000_000_000_000_000u64;
    let mut tasks = Vec::new();
    for task in 0..64u64 {
        let s = if task % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut used = 0;
            for i in 0..20u64 {
                let reserved = 1 + (task + i) % 3;
                let d = Store::<str>::check(&s, "k", reserved, now).await.unwrap();
                if d.allowed {
                    let actual = (task * 7 + i * 3) % 5;
                    settle(&s, "k", reserved, actual, now, now).await;
                    used += actual;
                }
            }
            used
        }));
    }
    let mut used = 0;
    for t in tasks {
        used += t.await.unwrap();
    }
    let peek = Store::<str>::check(&a, "k", 0, now).await.unwrap();
    assert_eq!(peek.reset, Duration::from_millis(used));
}

/// A store of two limits settles both in one script: the one left in debt
/// answers, and the next check is denied with its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_two_limits_settles_both() {
    let server = server!();
    let per_second = "gcra 100/1s".parse::<AnyAlgorithm>().unwrap();
    let per_minute = "fixed-window 10/1m".parse::<AnyAlgorithm>().unwrap();
    let s = RedisStore::builder(server.url(), per_second)
        .and_limit(per_minute)
        .prefix("m:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let now = 1_700_000_000_000_000_000u64;
    let minute_left = Duration::from_nanos(60_000_000_000 - now % 60_000_000_000);
    assert!(Store::<str>::check(&s, "k", 2, now).await.unwrap().allowed);
    // 12 of 10 a minute: in debt until the window ends; 12 of 100 a second
    // is not a debt.
    let d = settle(&s, "k", 2, 12, now, now).await;
    assert!(!d.allowed, "{d:?}");
    assert_eq!((d.limit, d.wait), (10, Some(minute_left)));
    let next = Store::<str>::check(&s, "k", 1, now).await.unwrap();
    assert_eq!(next.retry_after(), Some(minute_left));
    // Settled down: both limits give back.
    let d = settle(&s, "k", 12, 4, now, now).await;
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.remaining, 6);
}

/// A live store settles its live key, as the memory store does under the
/// same live settings.
#[cfg(feature = "live")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_store_settles_as_in_memory() {
    use ratelimit_core::LiveAlgorithm;
    use ratelimit_redis::{AnyStore, LiveRedis};
    let server = server!();
    let live = LiveAlgorithm::new("gcra 10/1s".parse::<AnyAlgorithm>().unwrap());
    let redis = LiveRedis::builder(server.url(), &live)
        .prefix("v:")
        .time_source(TimeSource::Caller)
        .build()
        .unwrap();
    let redis: AnyStore<String> = AnyStore::LiveRedis(Box::new(redis));
    let memory: MemoryStore<LiveAlgorithm, String> = MemoryStore::new(live.clone());
    let k = "key".to_owned();
    let now = 1_700_000_000_000_000_000u64;
    for (reserved, actual, step) in [(1, 5, 0), (2, 9, 10_000_000), (1, 12, 900_000_000)] {
        let at = now + step;
        let m = memory.check(&k, reserved, at).value().unwrap();
        assert_eq!(redis.check(&k, reserved, at).await.unwrap(), m);
        if m.allowed {
            let m = memory.settle(&k, reserved, actual, at, at).await.unwrap();
            assert_eq!(redis.settle(&k, reserved, actual, at, at).await.unwrap(), m);
        }
    }
    // A change to a smaller burst keeps the debt.
    live.set("gcra 5/1s".parse::<AnyAlgorithm>().unwrap());
    let at = now + 1_000_000_000;
    let m = memory.check(&k, 1, at).value().unwrap();
    assert_eq!(redis.check(&k, 1, at).await.unwrap(), m);
    assert!(!m.allowed, "{m:?}");
}
