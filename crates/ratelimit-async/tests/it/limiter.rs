//! `Limiter`: exact pacing of concurrent waiters on tokio's paused clock,
//! their order, cancel safety, jitter, the stream adapter, and the Redis
//! store (the real timer's wake-up error is measured in `wake_up.rs`).

use futures_util::StreamExt;
use ratelimit_async::{Limiter, WaitError};
use ratelimit_core::{Gcra, LeakyBucket, MemoryStore, SlidingLog, Store, TokioClock};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);

fn k() -> String {
    "k".to_string()
}

/// Spawns `n` waiters for one key at once; returns their admission
/// instants (since the start), sorted.
async fn admissions<S: Store<String>>(limiter: Limiter<String, S>, n: usize) -> Vec<Duration> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.until_ready(&k(), 1).await.unwrap();
                start.elapsed()
            })
        })
        .collect();
    let mut at = Vec::new();
    for t in tasks {
        at.push(t.await.unwrap());
    }
    at.sort();
    at
}

#[tokio::test(start_paused = true)]
async fn sixty_four_waiters_are_admitted_at_exactly_the_gcra_pace() {
    // 10 per second, burst 10: ten at once, then one every 100 ms.
    let limiter =
        Limiter::new(MemoryStore::new(Gcra::new(10, SECOND).unwrap())).clock(TokioClock::new());
    let at = admissions(limiter, 64).await;
    let expected: Vec<Duration> = (0..64u32)
        .map(|i| {
            if i < 10 {
                Duration::ZERO
            } else {
                100 * MS * (i - 9)
            }
        })
        .collect();
    assert_eq!(at, expected);
}

#[tokio::test(start_paused = true)]
async fn sixty_four_waiters_are_admitted_at_exactly_the_sliding_log_pace() {
    // 10 in any second: ten at 0 s, ten at 1 s, ...
    let limiter = Limiter::new(MemoryStore::new(SlidingLog::new(10, SECOND).unwrap()))
        .clock(TokioClock::new());
    let at = admissions(limiter, 64).await;
    let expected: Vec<Duration> = (0..64u32).map(|i| SECOND * (i / 10)).collect();
    assert_eq!(at, expected);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_wait_takes_nothing() {
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(10, SECOND, 1).unwrap()))
        .clock(TokioClock::new());
    assert!(limiter.check(&k(), 1).await.unwrap().allowed);
    // Denied for 100 ms; give up after 50.
    let gave_up = tokio::time::timeout(50 * MS, limiter.until_ready(&k(), 1)).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(50 * MS).await;
    // At 100 ms the permit is still there: the dropped wait took nothing.
    assert!(limiter.check(&k(), 1).await.unwrap().allowed);
}

#[tokio::test(start_paused = true)]
async fn a_leaky_bucket_hold_is_slept_and_refunded_when_dropped() {
    // 10 per second, a queue of 5: the second request is held 100 ms.
    let limiter = Limiter::new(MemoryStore::new(LeakyBucket::new(10, SECOND, 5).unwrap()))
        .clock(TokioClock::new());
    let start = Instant::now();
    limiter.until_ready(&k(), 1).await.unwrap();
    limiter.until_ready(&k(), 1).await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
    // Held 100 ms more; dropped after 10: refunded, so the queue has the
    // same room as before.
    let room = limiter.check(&k(), 0).await.unwrap().remaining;
    let dropped = tokio::time::timeout(10 * MS, limiter.until_ready(&k(), 1)).await;
    assert!(dropped.is_err());
    tokio::task::yield_now().await;
    let after = limiter.check(&k(), 0).await.unwrap().remaining;
    assert!(
        after >= room,
        "room {room} before, {after} after the dropped hold"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cost_above_the_capacity_is_never_waited_for() {
    let limiter =
        Limiter::new(MemoryStore::new(Gcra::new(10, SECOND).unwrap())).clock(TokioClock::new());
    let start = Instant::now();
    let err = limiter.until_ready(&k(), 11).await.unwrap_err();
    assert_eq!(
        err,
        WaitError::Never {
            cost: 11,
            limit: 10
        }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn jitter_adds_at_most_its_maximum() {
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(10, SECOND, 1).unwrap()))
        .clock(TokioClock::new())
        .jitter(50 * MS);
    let mut waits = Vec::new();
    for _ in 0..20 {
        limiter.until_ready(&k(), 1).await.unwrap();
        let start = Instant::now();
        limiter.until_ready(&k(), 1).await.unwrap();
        waits.push(start.elapsed());
        tokio::time::sleep(SECOND).await;
    }
    assert!(
        waits.iter().all(|w| (100 * MS..=150 * MS).contains(w)),
        "{waits:?}"
    );
    assert!(
        waits.iter().any(|w| *w > 100 * MS),
        "never jittered: {waits:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn paced_stream_keeps_each_keys_order_and_pace_without_blocking_others() {
    // 50 per second per tenant, no burst: one every 20 ms each.
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(50, SECOND, 1).unwrap()))
        .clock(TokioClock::new());
    // Tenant a floods first; b's two jobs come last.
    let jobs = (0..10).map(|i| ("a", i)).chain([("b", 0), ("b", 1)]);
    let start = Instant::now();
    let mut paced = limiter.pace(futures_util::stream::iter(jobs), 64, |j: &(&str, i32)| {
        j.0.to_string()
    });
    let mut seen = Vec::new();
    while let Some(job) = paced.next().await {
        seen.push((job.unwrap(), start.elapsed()));
    }
    let of = |tenant: &str| -> Vec<(i32, Duration)> {
        seen.iter()
            .filter(|((t, _), _)| *t == tenant)
            .map(|((_, i), at)| (*i, *at))
            .collect()
    };
    let a: Vec<_> = (0..10u32).map(|i| (i as i32, 20 * MS * i)).collect();
    assert_eq!(of("a"), a);
    assert_eq!(of("b"), vec![(0, Duration::ZERO), (1, 20 * MS)]);
}

#[tokio::test(start_paused = true)]
async fn paced_stream_with_a_buffer_of_one_is_strictly_in_order() {
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(50, SECOND, 1).unwrap()))
        .clock(TokioClock::new());
    let jobs = [("a", 0), ("a", 1), ("b", 0)];
    let start = Instant::now();
    let paced = limiter.pace(futures_util::stream::iter(jobs), 1, |j: &(&str, i32)| {
        j.0.to_string()
    });
    let seen: Vec<_> = paced.map(|j| (j.unwrap(), start.elapsed())).collect().await;
    assert_eq!(
        seen,
        vec![
            (("a", 0), Duration::ZERO),
            (("a", 1), 20 * MS),
            (("b", 0), 20 * MS)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn paced_stream_hands_back_what_it_cannot_admit() {
    let limiter = Limiter::new(MemoryStore::new(SlidingLog::new(1, SECOND).unwrap()))
        .clock(TokioClock::new());
    limiter.check(&"a".to_string(), 1).await.unwrap();
    let _ = limiter.until_ready(&"never".to_string(), 2).await; // nothing taken
    let mut paced = Limiter::new(MemoryStore::new(Gcra::with_burst(1, SECOND, 1).unwrap()))
        .clock(TokioClock::new())
        .jitter(Duration::ZERO)
        .pace(futures_util::stream::iter([5u64]), 4, |_: &u64| {
            "k".to_string()
        });
    assert_eq!(paced.next().await.unwrap().unwrap(), 5);
    assert!(paced.next().await.is_none());
    drop(limiter);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_waiters_are_paced_too() {
    let Some(server) = ratelimit_test_support::RedisServer::start() else {
        return;
    };
    // 20 per second, burst 1: one every 50 ms, decided on Redis's clock.
    // A patient store: a late answer on a busy machine is not an error.
    let store = ratelimit_redis::RedisStore::builder(
        server.url().as_str(),
        Gcra::with_burst(20, SECOND, 1).unwrap(),
    )
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    // Connected, and its script loaded, before the clock starts.
    Store::<String>::check(&store, &"warm".to_string(), 0, 0)
        .await
        .unwrap();
    let limiter: Limiter<String, _> = Limiter::new(store).clock(TokioClock::new());
    let at = admissions(limiter, 6).await;
    // Real time, seen through a network: the five gaps are 50 ms each on
    // Redis's clock. Each is seen at 25 ms or more (all at once, unpaced,
    // they would be a round trip apart), the five at 200 ms or more, and
    // the run takes at most a second more than the pace allows (a busy
    // machine's round trips and timer wakes).
    for pair in at.windows(2) {
        assert!(pair[1] - pair[0] >= 25 * MS, "{at:?}");
    }
    assert!(at[5] - at[0] >= 200 * MS, "{at:?}");
    assert!(at[5] <= 250 * MS + 1_000 * MS, "{at:?}");
}

#[tokio::test(start_paused = true)]
async fn waiters_on_a_key_are_served_first_come_first_served() {
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(10, SECOND, 1).unwrap()))
        .clock(TokioClock::new());
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..10 {
        let (limiter, order) = (limiter.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            limiter.until_ready(&k(), 1).await.unwrap();
            order.lock().unwrap().push((i, Instant::now()));
        }));
        // Let it queue before the next one comes.
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap();
    let ids: Vec<i32> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
}

#[test]
fn limiters_are_send_sync_and_clone() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Limiter<String, MemoryStore<Gcra, String>>>();
    let _ = Arc::new(());
}

/// A limiter's default clock is the system clock every layer of
/// tower-ratelimit uses by default, so a memory store shared with a layer
/// agrees on the time with nothing to set.
#[tokio::test]
async fn the_default_clock_is_the_layers_system_clock() {
    use ratelimit_core::{Clock, SystemClock};
    let limiter: Limiter<str, MemoryStore<Gcra, String>> =
        Limiter::new(MemoryStore::new(Gcra::new(10, SECOND).unwrap()));
    let system = SystemClock::new().now();
    assert!(system > 1_600_000_000 * 1_000_000_000, "{system}");
    let apart = limiter.now().abs_diff(system);
    assert!(apart < 60 * 1_000_000_000, "{apart} ns apart");
}
