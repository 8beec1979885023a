//! The local deny cache: a flood of denials costs Redis nothing, the
//! answers are Redis's, and what it gets wrong with several instances
//! stays within the bounds of the crate docs ("The deny cache").

use crate::harness::Client as _;
use crate::server;
use ratelimit_core::{
    Algorithm, AnyAlgorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, Store,
    TokenBucket,
};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const EPOCH: u64 = 1_700_000_000_000_000_000;

fn caller(url: String, a: impl Into<AnyAlgorithm>, cache: usize) -> RedisStore {
    RedisStore::builder(url, a)
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .deny_cache(cache)
        .build()
        .unwrap()
}

async fn check(s: &RedisStore, key: &str, cost: u64, now: u64) -> ratelimit_core::Decision {
    Store::<str>::check(s, key, cost, now).await.unwrap()
}

/// A single-client flood: after the first denial, Redis sees nothing more
/// until the wait runs out (server time, the default).
#[tokio::test]
async fn a_flood_of_denials_makes_no_round_trips() {
    let server = server!();
    let mut admin = server.client().await;
    let store = RedisStore::builder(
        server.url(),
        FixedWindow::new(5, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    for _ in 0..5 {
        assert!(check(&store, "flood", 1, 0).await.allowed);
    }
    let first = check(&store, "flood", 1, 0).await;
    assert!(!first.allowed);
    let before = crate::harness::round_trips(&mut admin).await;
    for _ in 0..1_000 {
        let d = check(&store, "flood", 1, 0).await;
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert!(d.wait.unwrap() <= first.wait.unwrap());
        assert!(d.reset <= first.reset);
    }
    assert_eq!(crate::harness::round_trips(&mut admin).await - before, 0);
    // Peeks and other costs still go to Redis.
    assert!(check(&store, "flood", 0, 0).await.allowed);
    assert!(!check(&store, "flood", 2, 0).await.allowed);
    assert_eq!(crate::harness::round_trips(&mut admin).await - before, 2);
}

/// One instance: the cached answers are Redis's, field for field, at every
/// instant until the wait runs out, and the key is admitted right then.
#[tokio::test]
async fn cached_answers_equal_redis_answers() {
    let server = server!();
    let hour = Duration::from_secs(3600);
    let algorithms: [AnyAlgorithm; 6] = [
        Gcra::new(3, Duration::from_secs(1)).unwrap().into(),
        TokenBucket::new(4, 3, Duration::from_secs(1))
            .unwrap()
            .into(),
        LeakyBucket::new(3, Duration::from_secs(1), 2)
            .unwrap()
            .into(),
        FixedWindow::new(3, hour).unwrap().into(),
        SlidingLog::new(3, Duration::from_secs(10)).unwrap().into(),
        SlidingWindow::new(3, Duration::from_secs(10))
            .unwrap()
            .into(),
    ];
    for a in algorithms {
        let cached = caller(server.url(), a, 64);
        let plain = caller(server.url(), a, 0);
        let mut now = EPOCH;
        while check(&cached, "k", 1, now).await.allowed {
            now += 1;
        }
        let denial = check(&cached, "k", 1, now).await;
        let wait = denial.wait.unwrap().as_nanos() as u64;
        for step in [0, 1, wait / 3, wait / 2, wait - 1] {
            let t = now + step;
            let from_cache = check(&cached, "k", 1, t).await;
            let from_redis = check(&plain, "k", 1, t).await;
            assert_eq!(from_cache, from_redis, "{a:?} at +{step}");
        }
        assert!(check(&cached, "k", 1, now + wait).await.allowed, "{a:?}");
    }
}

/// This instance's refund clears the key: the next check sees Redis.
#[tokio::test]
async fn a_refund_from_this_instance_clears_the_key() {
    let server = server!();
    let store = caller(
        server.url(),
        FixedWindow::new(2, Duration::from_secs(60)).unwrap(),
        64,
    );
    let t = EPOCH;
    assert!(check(&store, "k", 1, t).await.allowed);
    assert!(check(&store, "k", 1, t + 1).await.allowed);
    assert!(!check(&store, "k", 1, t + 2).await.allowed);
    Store::<str>::refund(&store, "k", 1, t, t + 3)
        .await
        .unwrap();
    assert!(check(&store, "k", 1, t + 4).await.allowed);
}

/// Another instance's refund: the cache keeps denying what Redis would
/// admit, but never longer than the documented bound (one emission
/// interval for GCRA and the buckets, `P` for the fixed window and the log,
/// `2P` for the sliding window), and it never admits what Redis denies.
#[tokio::test]
async fn another_instances_refund_is_missed_within_the_bound() {
    let server = server!();
    let p = Duration::from_secs(10);
    let cases: [(AnyAlgorithm, Duration); 6] = [
        (Gcra::new(4, p).unwrap().into(), p / 4),
        (TokenBucket::new(4, 4, p).unwrap().into(), p / 4),
        (LeakyBucket::new(4, p, 3).unwrap().into(), p / 4),
        (FixedWindow::new(4, p).unwrap().into(), p),
        (SlidingLog::new(4, p).unwrap().into(), p),
        (SlidingWindow::new(4, p).unwrap().into(), 2 * p),
    ];
    for (i, (a, bound)) in cases.into_iter().enumerate() {
        let key = format!("k{i}");
        let key = key.as_str();
        let (x, y) = (caller(server.url(), a, 64), caller(server.url(), a, 64));
        let probe = caller(server.url(), a, 0);
        let t = EPOCH;
        let mut admitted = Vec::new();
        let mut now = t;
        while check(&x, key, 1, now).await.allowed {
            admitted.push(now);
            now += 1;
        }
        // y is denied and caches it.
        let denial = check(&y, key, 1, now).await;
        assert!(!denial.allowed, "{a:?}");
        let wait = denial.wait.unwrap();
        assert!(wait <= bound, "{a:?}: cost-1 wait {wait:?} above {bound:?}");
        // x gives one back: Redis admits again, y's cache still denies.
        Store::<str>::refund(&x, key, 1, *admitted.last().unwrap(), now + 1)
            .await
            .unwrap();
        let wrong_from = now + 2;
        assert!(!check(&y, key, 1, wrong_from).await.allowed, "{a:?}");
        let truth = check(&probe, key, 1, wrong_from).await;
        assert!(truth.allowed, "{a:?}: the refund did not free a place");
        Store::<str>::refund(&probe, key, 1, wrong_from, wrong_from)
            .await
            .unwrap();
        // The wrong denials end by the cached wait, within the bound, or
        // when the cache asks Redis again (after 1 s), if sooner.
        let until = now + wait.min(Duration::from_secs(1)).as_nanos() as u64;
        assert!(!check(&y, key, 1, until - 1).await.allowed, "{a:?}");
        assert!(check(&y, key, 1, until).await.allowed, "{a:?}");
        // Over the whole episode the fleet never admitted more than the
        // limit: the cache only denies.
        assert!(admitted.len() as u64 <= a.limit() + 1, "{a:?}");
    }
}

/// The cache's memory is bounded: many denied keys, one store, at most
/// the cap held; the keys it evicted simply go back to Redis.
#[tokio::test]
async fn many_denied_keys_stay_within_the_cap() {
    let server = server!();
    let mut admin = server.client().await;
    let store = caller(
        server.url(),
        FixedWindow::new(1, Duration::from_secs(60)).unwrap(),
        8,
    );
    let t = EPOCH;
    for i in 0..64 {
        let k = format!("k{i}");
        assert!(check(&store, &k, 1, t).await.allowed);
        assert!(!check(&store, &k, 1, t).await.allowed);
    }
    let before = crate::harness::round_trips(&mut admin).await;
    for i in 0..64 {
        assert!(!check(&store, &format!("k{i}"), 1, t + 1).await.allowed);
    }
    let trips = crate::harness::round_trips(&mut admin).await - before;
    let hits = 64 - trips;
    assert!(hits <= 8, "{hits} keys answered locally with a cap of 8");
    assert!(hits >= 1, "the latest keys are kept");
}
