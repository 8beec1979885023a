//! Several limits in one store (`and_limit`): one script, one round trip,
//! one read of the server's time, all or nothing, exact under concurrency
//! as memory is.

use crate::harness::{Client as _, Rng};
use crate::server;
use ratelimit_core::{
    AnyAlgorithm, BanPolicy, Decision, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog,
    SlidingWindow, Store, TokenBucket,
};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn group(url: String, limits: &[AnyAlgorithm], time: TimeSource, cache: usize) -> RedisStore {
    let mut b = RedisStore::builder(url, limits[0])
        .time_source(time)
        .timeout(Duration::from_secs(5))
        .deny_cache(cache);
    for a in &limits[1..] {
        b = b.and_limit(*a);
    }
    b.build().unwrap()
}

/// 64 tasks on two stores (two connections): the tighter limit is reached
/// exactly, and the looser one holds exactly what was admitted, so the
/// denied requests consumed nothing from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_admit_exactly_and_denials_consume_nothing() {
    let server = server!();
    let looser: [AnyAlgorithm; 6] = [
        Gcra::new(50, HOUR).unwrap().into(),
        TokenBucket::new(50, 1, HOUR).unwrap().into(),
        LeakyBucket::new(1, HOUR, 49).unwrap().into(),
        FixedWindow::new(50, HOUR).unwrap().into(),
        SlidingLog::new(50, HOUR).unwrap().into(),
        SlidingWindow::new(50, HOUR).unwrap().into(),
    ];
    let tighter: AnyAlgorithm = FixedWindow::new(30, 2 * HOUR).unwrap().into();
    for (i, first) in looser.into_iter().enumerate() {
        let key = format!("shared-{i}");
        let limits = [first, tighter];
        let (a, b) = (
            group(server.url(), &limits, TimeSource::Redis, 0),
            group(server.url(), &limits, TimeSource::Redis, 0),
        );
        let total = crate::harness::admitted_by_tasks(&a, &b, &key, 64, 3).await;
        assert_eq!(total, 30, "{first:?}");
        // The looser limit alone, on the same Redis key: 30 taken, 20 left.
        let alone = RedisStore::builder(server.url(), first)
            .deny_cache(0)
            .build()
            .unwrap();
        let peek = Store::<str>::check(&alone, &key, 0, 0).await.unwrap();
        assert_eq!(peek.remaining, 20, "{first:?}: denied requests consumed");
    }
}

/// The reference: the limits in memory, checked in order under one lock,
/// the earlier ones given back at once when one denies (as the HTTP layer
/// does in memory); combined as the store documents.
fn reference(
    memory: &[MemoryStore<AnyAlgorithm, String>],
    key: &str,
    cost: u64,
    now: u64,
) -> Decision {
    let mut admitted = Vec::new();
    for (i, m) in memory.iter().enumerate() {
        let d = m.check(key, cost, now).value().unwrap();
        if !d.allowed {
            for earlier in &memory[..i] {
                earlier.refund(key, cost, now, now).value().unwrap();
            }
            return d;
        }
        admitted.push(d);
    }
    let wait = admitted.iter().filter_map(|d| d.wait).max();
    // One more unit is available when every limit has one.
    let next = admitted.iter().map(|d| d.next).max().unwrap();
    let mut best = admitted
        .into_iter()
        .reduce(|a, b| if b.remaining < a.remaining { b } else { a })
        .unwrap();
    best.wait = wait;
    best.next = next;
    best
}

/// Random traces at epoch times: every decision of a two- or three-limit
/// store equals the in-memory reference, field for field (deny cache on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_match_memory_on_random_traces() {
    let server = server!();
    let s = Duration::from_secs(1);
    let sets: Vec<Vec<AnyAlgorithm>> = vec![
        vec![
            Gcra::new(5, s).unwrap().into(),
            FixedWindow::new(3, s).unwrap().into(),
        ],
        vec![
            FixedWindow::new(7, 3 * s).unwrap().into(),
            Gcra::with_burst(3, s, 2).unwrap().into(),
        ],
        vec![
            SlidingWindow::new(4, s).unwrap().into(),
            SlidingLog::new(6, 2 * s).unwrap().into(),
            TokenBucket::new(3, 2, s).unwrap().into(),
        ],
        vec![
            LeakyBucket::new(2, s, 3).unwrap().into(),
            SlidingLog::new(3, s).unwrap().into(),
        ],
    ];
    for (i, limits) in sets.iter().enumerate() {
        let redis = group(server.url(), limits, TimeSource::Caller, 64);
        let memory: Vec<MemoryStore<AnyAlgorithm, String>> =
            limits.iter().map(|a| MemoryStore::new(*a)).collect();
        let mut rng = Rng(0xab ^ i as u64);
        let mut now = 1_700_000_000_000_000_000 + rng.below(1 << 40);
        let (mut allowed, mut denied) = (0, 0);
        for op in 0..600 {
            now += match rng.below(10) {
                0..=3 => 0,
                4..=6 => rng.below(50_000_000),
                7 | 8 => rng.below(400_000_000),
                _ => rng.below(3_000_000_000),
            };
            let key = ["a", "b", "{c}"][rng.below(3) as usize];
            let cost = match rng.below(10) {
                0 => 0,
                1 => 2,
                _ => 1,
            };
            let m = reference(&memory, key, cost, now);
            let r = Store::<str>::check(&redis, key, cost, now).await.unwrap();
            assert_eq!(r, m, "set {i} op {op}: {key} cost {cost} at {now}");
            if m.allowed {
                allowed += 1
            } else {
                denied += 1
            }
        }
        assert!(
            allowed > 100 && denied > 50,
            "set {i}: {allowed} admitted, {denied} denied"
        );
    }
}

/// A refund gives back to every limit; the deny cache answers a denial of
/// the group with the denying limit's numbers.
#[tokio::test]
async fn refunds_and_the_deny_cache_cover_every_limit() {
    let server = server!();
    let limits: [AnyAlgorithm; 2] = [
        FixedWindow::new(3, HOUR).unwrap().into(),
        Gcra::new(2, HOUR).unwrap().into(),
    ];
    let cached = group(server.url(), &limits, TimeSource::Caller, 64);
    let plain = group(server.url(), &limits, TimeSource::Caller, 0);
    let t = 1_700_000_000_000_000_000;
    let check = |s: &RedisStore, now| {
        let s = s.clone();
        async move { Store::<str>::check(&s, "k", 1, now).await.unwrap() }
    };
    assert!(check(&cached, t).await.allowed);
    assert!(check(&cached, t).await.allowed);
    let denied = check(&cached, t + 1).await;
    assert!(!denied.allowed);
    assert_eq!(denied.limit, 2, "the GCRA denies");
    assert_eq!(check(&cached, t + 5).await, check(&plain, t + 5).await);
    Store::<str>::refund(&cached, "k", 1, t, t + 6)
        .await
        .unwrap();
    let d = check(&cached, t + 7).await;
    assert!(d.allowed, "{d:?}");
    // The fixed window got its unit back too: 3 - 2 = 1 left.
    assert_eq!(d.remaining, 0);
    let window = RedisStore::builder(server.url(), limits[0])
        .time_source(TimeSource::Caller)
        .deny_cache(0)
        .build()
        .unwrap();
    assert_eq!(
        Store::<str>::check(&window, "k", 0, t + 8)
            .await
            .unwrap()
            .remaining,
        1
    );
}

/// A call reads the server's `TIME` once: its ban, every limit and the
/// ban a denial makes are decided at one instant, on Redis 7.0 (whose
/// `TIME` moves within a script) as on Valkey (whose `TIME` does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_reads_the_servers_time_once() {
    let server = server!();
    let store = RedisStore::builder(server.url(), FixedWindow::new(2, HOUR).unwrap())
        .and_limit(Gcra::new(3, HOUR).unwrap())
        .ban(Some(BanPolicy::new(HOUR).unwrap()))
        .deny_cache(0)
        .build()
        .unwrap();
    let check = || async { Store::<str>::check(&store, "k", 1, 0).await.unwrap() };
    let mut c = server.client().await;
    let before = crate::harness::command_calls(&mut c, "time").await;
    assert!(check().await.allowed);
    assert!(check().await.allowed);
    let d = check().await;
    assert!(!d.allowed && d.banned, "the window denies and bans: {d:?}");
    assert!(check().await.banned);
    Store::<str>::refund(&store, "k", 1, 0, 0).await.unwrap();
    let calls = crate::harness::command_calls(&mut c, "time").await - before;
    assert_eq!(calls, 5, "four checks and a refund");
}

#[test]
fn the_same_limit_twice_is_rejected() {
    let g = Gcra::new(3, HOUR).unwrap();
    let e = RedisStore::builder("redis://127.0.0.1/", g)
        .and_limit(g)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("the same limit twice"), "{e}");
}

/// Redis down: the in-memory fallback checks the limits all or nothing too.
#[tokio::test]
async fn the_fallback_is_all_or_nothing() {
    let store = RedisStore::builder("redis://127.0.0.1:1/", FixedWindow::new(3, HOUR).unwrap())
        .and_limit(Gcra::new(2, HOUR).unwrap())
        .timeout(Duration::from_millis(200))
        .fallback_to_memory(100)
        .build()
        .unwrap();
    let check = |cost| {
        let s = store.clone();
        async move { Store::<str>::check(&s, "k", cost, 1).await.unwrap() }
    };
    assert!(check(1).await.allowed);
    assert!(!check(2).await.allowed, "the GCRA has 1 left");
    // The denied cost-2 took nothing from the window: 2 left there, 1 in
    // the GCRA.
    let d = check(1).await;
    assert!(d.allowed);
    assert_eq!(d.remaining, 0);
    let d = check(0).await;
    assert_eq!((d.limit, d.remaining), (2, 0));
}
