//! Decisions match ratelimit-core's, field for field, on random traces at
//! real epoch times (the time injected with `TimeSource::Caller`).

use crate::harness::Client as _;
use crate::harness::Rng;
use crate::server;
use ratelimit_core::algorithm::{Anchor, CalendarUnit};
use ratelimit_core::{
    Algorithm, AnyAlgorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog,
    SlidingWindow, Store, TokenBucket,
};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const S: Duration = Duration::from_secs(1);
/// Seeds per algorithm; `RATELIMIT_REDIS_SEEDS=N` runs longer traces.
fn seeds() -> u64 {
    std::env::var("RATELIMIT_REDIS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}
const OPS: usize = 400;
const KEYS: [&str; 4] = ["a", "b", "user:{42}", "}x{"];

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// (algorithm, P / L in ns, window in ns): the trace's time scales.
fn scales(a: &AnyAlgorithm) -> (u64, u64) {
    let w = a.window().as_nanos() as u64;
    (w / a.limit().max(1) + 1, w)
}

/// Random traces of checks and refunds at epoch-nanosecond times; every
/// Redis decision must equal the in-memory one.
async fn compare(algorithms: Vec<AnyAlgorithm>, seeds: u64, ops: usize) {
    let server = server!();
    for (i, algorithm) in algorithms.into_iter().enumerate() {
        let mut stats = [0u32; 4];
        let mut refunds = 0;
        for seed in 0..seeds {
            let mut rng = Rng(0x5eed ^ (i as u64) << 20 ^ seed);
            let redis = RedisStore::builder(server.url(), algorithm)
                .prefix(format!("t{i}-{seed}:"))
                .time_source(TimeSource::Caller)
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap();
            let memory: MemoryStore<AnyAlgorithm, String> = MemoryStore::new(algorithm);
            let (unit, window) = scales(&algorithm);
            // Real epoch nanoseconds (2020 to 2030), or any time up to the
            // year 2477; sometimes on a whole second.
            let mut now = if seed % 2 == 0 {
                1_580_000_000_000_000_000 + rng.below(320_000_000_000_000_000)
            } else {
                rng.below(16_000_000_000_000_000_000)
            };
            if rng.chance(50) {
                now -= now % 1_000_000_000;
            }
            let mut admitted: Vec<(&str, u64, u64)> = Vec::new();
            for op in 0..ops {
                now += match rng.below(10) {
                    0..=2 => 0,
                    3 | 4 => rng.below(unit),
                    5 | 6 => (unit * rng.below(3) + rng.below(3)).saturating_sub(rng.below(2)),
                    7 | 8 => rng.below(3 * unit),
                    _ => rng.below(2 * window + 1),
                };
                let key = KEYS[rng.below(KEYS.len() as u64) as usize];
                let limit = algorithm.limit();
                let cost = match rng.below(20) {
                    0 | 1 => 0,
                    2 | 3 => 2,
                    4 => 3,
                    5 => limit,
                    6 => limit + 1,
                    7 if rng.chance(20) => u64::MAX,
                    _ => 1,
                };
                // ratelimit-core drops a first-request window refunded to a
                // count of 0 whenever a sweep happens to run (its is_full
                // says count == 0), so its decisions after such a refund
                // depend on sweep timing; Redis keeps the window, as the
                // contract says. Refunds are compared for every other
                // algorithm.
                let first_request = matches!(
                    algorithm,
                    AnyAlgorithm::FixedWindow(w) if w.anchor() == Anchor::FirstRequest
                );
                if !first_request && rng.chance(10) && !admitted.is_empty() {
                    let (k, at, c) =
                        admitted.swap_remove(rng.below(admitted.len() as u64) as usize);
                    let back = if rng.chance(70) { c } else { 1 };
                    refunds += 1;
                    memory.refund(k, back, at, now).value().unwrap();
                    Store::<str>::refund(&redis, k, back, at, now)
                        .await
                        .unwrap();
                    continue;
                }
                let m = memory.check(key, cost, now).value().unwrap();
                let r = Store::<str>::check(&redis, key, cost, now).await.unwrap();
                assert_eq!(
                    r, m,
                    "{algorithm:?} seed {seed} op {op}: key {key:?} cost {cost} at {now}\n redis:  {r:?}\n memory: {m:?}"
                );
                stats[usize::from(m.allowed) + 2 * usize::from(m.is_never())] += 1;
                if m.allowed && cost > 0 {
                    admitted.push((key, now, cost));
                }
            }
        }
        // The traces must reach every kind of decision.
        let [denied, allowed, never, _] = stats;
        eprintln!(
            "{algorithm:?}: {allowed} admitted, {denied} denied, {never} never, {refunds} refunds"
        );
        assert!(
            allowed > 50 && denied >= 10 && never >= 5,
            "{algorithm:?}: trace too tame {stats:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_and_token_bucket_match_core() {
    compare(
        vec![
            Gcra::new(3, S).unwrap().into(),
            Gcra::new(7, S).unwrap().into(),
            Gcra::with_burst(7, S, 2).unwrap().into(),
            Gcra::with_burst(3, S, 1).unwrap().into(),
            Gcra::with_burst(1000, Duration::from_secs(3600), 50)
                .unwrap()
                .into(),
            Gcra::new(13, Duration::from_secs(7 * 86_400))
                .unwrap()
                .into(),
            Gcra::with_burst(3_000_000_007, S, 5).unwrap().into(),
            TokenBucket::new(5, 3, S).unwrap().into(),
            TokenBucket::new(10, 7, ms(1500)).unwrap().into(),
        ],
        seeds(),
        OPS,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_matches_core() {
    compare(
        vec![
            LeakyBucket::new(3, S, 2).unwrap().into(),
            LeakyBucket::new(7, S, 0).unwrap().into(),
            LeakyBucket::new(2, S, 5).unwrap().into(),
            LeakyBucket::new(999_983, Duration::from_secs(60), 10)
                .unwrap()
                .into(),
        ],
        seeds(),
        OPS,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_matches_core() {
    compare(
        vec![
            FixedWindow::new(3, S).unwrap().into(),
            FixedWindow::new(7, ms(1500)).unwrap().into(),
            FixedWindow::new(3, S)
                .unwrap()
                .with_anchor(Anchor::FirstRequest)
                .unwrap()
                .into(),
            FixedWindow::new(7, S)
                .unwrap()
                .with_anchor(Anchor::KeyOffset)
                .unwrap()
                .into(),
            FixedWindow::new(5, Duration::from_nanos(1_234_567_891))
                .unwrap()
                .with_anchor(Anchor::KeyOffset)
                .unwrap()
                .into(),
            FixedWindow::new(100, Duration::from_secs(86_400))
                .unwrap()
                .into(),
            // Calendar weeks (from Monday) and months of the UTC calendar.
            FixedWindow::per_calendar_unit(5, CalendarUnit::Week)
                .unwrap()
                .into(),
            FixedWindow::per_calendar_unit(5, CalendarUnit::Month)
                .unwrap()
                .into(),
            FixedWindow::per_calendar_unit(2, CalendarUnit::Month)
                .unwrap()
                .into(),
        ],
        seeds(),
        OPS,
    )
    .await;
}

/// A monthly limit on both sides of month ends (leap and non-leap
/// Februaries, 2000 and 2100 among them, and a new year): Redis decides
/// as memory does, and a denial 1 ns before the first waits 1 ns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendar_months_end_on_the_first_as_in_memory() {
    let server = server!();
    let monthly: AnyAlgorithm = FixedWindow::per_calendar_unit(2, CalendarUnit::Month)
        .unwrap()
        .into();
    let redis = RedisStore::builder(server.url(), monthly)
        .prefix("months:")
        .time_source(TimeSource::Caller)
        .build()
        .unwrap();
    let memory: MemoryStore<AnyAlgorithm, String> = MemoryStore::new(monthly);
    // The first of: March 2024, 2023, 2000, 2100; February 2025; January 2026.
    // Taken in time order (below): a memory shard never moves its time
    // back, so a key after a later one in its shard would decide later.
    let mut firsts: [u64; 6] = [
        1_709_251_200,
        1_677_628_800,
        951_868_800,
        4_107_542_400,
        1_738_368_000,
        1_767_225_600,
    ];
    firsts.sort_unstable();
    for (i, first) in firsts.into_iter().enumerate() {
        let at = first * 1_000_000_000;
        let key = format!("k{i}");
        // Full 1 ns before the first (a denial waits 1 ns), fresh at it.
        for (now, cost, allowed) in [(at - 1, 2, true), (at - 1, 1, false), (at, 2, true)] {
            let m = memory.check(&key, cost, now).value().unwrap();
            let r = Store::<str>::check(&redis, &key, cost, now).await.unwrap();
            assert_eq!(r, m, "{key} cost {cost} at {now}");
            let wait = Duration::from_nanos(u64::from(!allowed));
            assert_eq!((m.allowed, m.wait), (allowed, Some(wait)), "{key} at {now}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_matches_core() {
    compare(
        vec![
            SlidingWindow::new(3, S).unwrap().into(),
            SlidingWindow::new(7, S).unwrap().into(),
            SlidingWindow::new(10, Duration::from_nanos(1_234_567_891))
                .unwrap()
                .into(),
            SlidingWindow::new(10_000, Duration::from_secs(3600))
                .unwrap()
                .into(),
            SlidingWindow::new(1_000_003, Duration::from_secs(20 * 86_400))
                .unwrap()
                .into(),
        ],
        seeds(),
        OPS,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_matches_core() {
    compare(
        vec![
            SlidingLog::new(3, S).unwrap().into(),
            SlidingLog::new(7, ms(1500)).unwrap().into(),
            SlidingLog::new(20, Duration::from_nanos(1_234_567_891))
                .unwrap()
                .into(),
        ],
        seeds(),
        OPS,
    )
    .await;
}

/// With the server's clock: the limit holds and the numbers are sane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_time_limits() {
    let server = server!();
    let store = RedisStore::builder(
        server.url(),
        Gcra::new(3, Duration::from_secs(3600)).unwrap(),
    )
    .build()
    .unwrap();
    for left in (0..3).rev() {
        let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, left);
    }
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(!d.allowed);
    let wait = d.retry_after().unwrap();
    assert!(
        wait > Duration::from_secs(1190) && wait <= Duration::from_secs(1200),
        "{wait:?}"
    );
    // The key carries a TTL close to its reset.
    let mut c = server.client().await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(store.redis_key("k"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(pttl > 3_590_000 && pttl <= 3_601_001, "{pttl}");
    // A refund in server time gives back the cost.
    Store::<str>::refund(&store, "k", 1, 0, 0).await.unwrap();
    assert!(
        Store::<str>::check(&store, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
}

/// Sliding log and the windows with the server's clock, refunds included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_time_windows_and_refund() {
    let server = server!();
    let algorithms: [AnyAlgorithm; 3] = [
        SlidingLog::new(2, Duration::from_secs(60)).unwrap().into(),
        SlidingWindow::new(2, Duration::from_secs(60))
            .unwrap()
            .into(),
        FixedWindow::new(2, Duration::from_secs(60)).unwrap().into(),
    ];
    for a in algorithms {
        let store = RedisStore::builder(server.url(), a)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let clock = std::time::Instant::now();
        let now = || clock.elapsed().as_nanos() as u64;
        let t1 = now();
        assert!(
            Store::<str>::check(&store, "k", 1, t1)
                .await
                .unwrap()
                .allowed,
            "{a:?}"
        );
        assert!(
            Store::<str>::check(&store, "k", 1, now())
                .await
                .unwrap()
                .allowed,
            "{a:?}"
        );
        assert!(
            !Store::<str>::check(&store, "k", 1, now())
                .await
                .unwrap()
                .allowed,
            "{a:?}"
        );
        Store::<str>::refund(&store, "k", 1, t1, now())
            .await
            .unwrap();
        let d = Store::<str>::check(&store, "k", 1, now()).await.unwrap();
        assert!(d.allowed, "{a:?}: refund did not give back: {d:?}");
    }
}

#[test]
fn unsupported_configurations_are_rejected() {
    let too_long = SlidingWindow::new(10, Duration::from_secs(30 * 86_400)).unwrap();
    let e = RedisStore::builder("redis://127.0.0.1/", too_long)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("2^51"), "{e}");
    let yearly = FixedWindow::per_calendar_unit(10, CalendarUnit::Year).unwrap();
    let e = RedisStore::builder("redis://127.0.0.1/", yearly)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("calendar year"), "{e}");
    let e = RedisStore::builder("redis://127.0.0.1/", Gcra::new(3, S).unwrap())
        .prefix("a{b")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("braces"), "{e}");
    assert!(RedisStore::builder("nonsense://", Gcra::new(3, S).unwrap())
        .build()
        .is_err());
}

/// Every key carries a TTL, and is gone soon after its state is full again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_once_full() {
    let server = server!();
    let mut c = server.client().await;
    let p = ms(100);
    let algorithms: [AnyAlgorithm; 6] = [
        Gcra::new(2, p).unwrap().into(),
        TokenBucket::new(2, 2, p).unwrap().into(),
        LeakyBucket::new(2, p, 1).unwrap().into(),
        FixedWindow::new(2, p).unwrap().into(),
        SlidingLog::new(2, p).unwrap().into(),
        SlidingWindow::new(2, p).unwrap().into(),
    ];
    for a in algorithms {
        let store = RedisStore::builder(server.url(), a)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        assert!(
            Store::<str>::check(&store, "k", 1, 0)
                .await
                .unwrap()
                .allowed
        );
        let key = store.redis_key("k");
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        // Full again within 2 periods, plus the 1 s slack.
        assert!(pttl > 0 && pttl <= 1_201, "{a:?}: PTTL {pttl}");
        let start = std::time::Instant::now();
        loop {
            let exists: bool = redis::cmd("EXISTS")
                .arg(&key)
                .query_async(&mut c)
                .await
                .unwrap();
            if !exists {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{a:?}: key never expired"
            );
            tokio::time::sleep(ms(20)).await;
        }
    }
}

/// The server's clock stepping back (NTP) does not reset a sliding window
/// or a sliding log: a state written "in the future" still counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_clock_stepping_back_keeps_windows() {
    let server = server!();
    let mut c = server.client().await;
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
    // Two minutes ahead, on a whole minute: a window the clock "left".
    let ahead = (secs + 120) / 60 * 60;
    let window = SlidingWindow::new(2, Duration::from_secs(60)).unwrap();
    let store = RedisStore::builder(server.url(), window)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(store.redis_key("k"))
        .arg(format!("{ahead}:0:0:2"))
        .query_async(&mut c)
        .await
        .unwrap();
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(!d.allowed, "{d:?}");

    let log = SlidingLog::new(2, Duration::from_secs(60)).unwrap();
    let store = RedisStore::builder(server.url(), log)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(store.redis_key("k"))
        .arg(&["u", "2", "h", "0", "t", "1", "0"])
        .arg(format!("{ahead}:0:2"))
        .query_async(&mut c)
        .await
        .unwrap();
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(!d.allowed, "{d:?}");
    assert_eq!(d.retry_after(), Some(Duration::from_secs(60)));
}
