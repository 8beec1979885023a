//! Many threads hammer one key at a frozen clock: exactly the burst is
//! admitted, never more, never less.

use ratelimit_core::store::Upkeep;
use ratelimit_core::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog, SlidingWindow, Store,
    TokenBucket,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

const THREADS: usize = 8;
const TRIES: usize = 2_000;

/// Runs `THREADS` threads of `TRIES` checks of cost 1 on one key at time
/// `now`, plus churn on other keys so shards grow and sweep meanwhile.
/// Returns the number admitted.
fn hammer<A: Algorithm>(algorithm: A, now: u64) -> u64 {
    let store = MemoryStore::<A, u64>::builder(algorithm)
        .shards(4)
        .build()
        .unwrap();
    let admitted = AtomicU64::new(0);
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (store, admitted, start) = (&store, &admitted, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..TRIES {
                    if store.check(&42, 1, now).value().unwrap().allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Other keys in the same store.
                    let other = 1_000 + (thread * TRIES + i) as u64;
                    store.check(&other, 1, now).value().unwrap();
                }
            });
        }
    });
    admitted.into_inner()
}

const NOW: u64 = 1_234_567_890_123;

#[test]
fn gcra_admits_exactly_the_burst() {
    let gcra = Gcra::with_burst(10, Duration::from_secs(1), 777).unwrap();
    assert_eq!(hammer(gcra, NOW), 777);
    let gcra = Gcra::new(3, Duration::from_secs(1)).unwrap();
    assert_eq!(hammer(gcra, NOW), 3);
}

#[test]
fn token_bucket_admits_exactly_the_capacity() {
    let bucket = TokenBucket::new(1_000, 7, Duration::from_secs(1)).unwrap();
    assert_eq!(hammer(bucket, NOW), 1_000);
}

#[test]
fn leaky_bucket_admits_exactly_the_queue_plus_one() {
    let bucket = LeakyBucket::new(10, Duration::from_secs(1), 499).unwrap();
    assert_eq!(hammer(bucket, NOW), 500);
}

#[test]
fn fixed_window_admits_exactly_the_limit() {
    let window = FixedWindow::new(1_500, Duration::from_secs(60)).unwrap();
    assert_eq!(hammer(window, NOW), 1_500);
}

#[test]
fn sliding_log_admits_exactly_the_limit() {
    let log = SlidingLog::new(999, Duration::from_secs(60)).unwrap();
    assert_eq!(hammer(log, NOW), 999);
}

#[test]
fn sliding_window_admits_exactly_the_limit() {
    let window = SlidingWindow::new(1_234, Duration::from_secs(60)).unwrap();
    assert_eq!(hammer(window, NOW), 1_234);
}

/// A caller that read its clock, was preempted, and arrives after another
/// caller opened a newer window: its check is decided at the newer time,
/// so it neither panics nor resets the window (which would let a second
/// window's worth through).
#[test]
fn late_callers_with_older_times_are_decided_at_the_latest_time() {
    let second = Duration::from_secs(1);
    let fixed = MemoryStore::<_, u64>::new(FixedWindow::new(2, second).unwrap());
    let log = MemoryStore::<_, u64>::new(SlidingLog::new(2, second).unwrap());
    let window = MemoryStore::<_, u64>::new(SlidingWindow::new(2, second).unwrap());
    let new = 2_000_000_000; // the start of window 2
    let old = new - 1; // read before it, arriving after
    for (name, check) in [
        (
            "fixed-window",
            &(|t| fixed.check(&1, 1, t).value().unwrap()) as &dyn Fn(u64) -> _,
        ),
        ("sliding-log", &|t| log.check(&1, 1, t).value().unwrap()),
        ("sliding-window", &|t| {
            window.check(&1, 1, t).value().unwrap()
        }),
    ] {
        assert!(check(new).allowed, "{name}");
        assert!(check(new).allowed, "{name}");
        let late = check(old);
        assert!(
            !late.allowed,
            "{name}: a stale time must not reopen the window"
        );
        assert_eq!(late.remaining, 0, "{name}");
    }
}

/// The same for GCRA: a late caller's older time must not read the state
/// as past its capacity (that is, as full), whichever path decides (a
/// store that updates one-word states lock-free must keep this).
#[test]
fn late_callers_of_a_one_word_state_are_decided_at_the_latest_time() {
    let store = MemoryStore::<_, u64>::new(Gcra::new(2, Duration::from_secs(1)).unwrap());
    let new = 2_000_000_000;
    assert!(store.check(&1, 1, new).value().unwrap().allowed);
    assert!(store.check(&1, 1, new).value().unwrap().allowed);
    // Costs other than 1 skip the denied slots, so the table decides.
    let late = store.check(&1, 2, new - 1).value().unwrap();
    assert!(!late.allowed, "a stale time must not read the key as full");
    assert_eq!(late.remaining, 0);
    let late = store.check(&1, 1, new - 1).value().unwrap();
    assert!(!late.allowed);
    assert_eq!(late.wait, Some(Duration::from_millis(500)));
}

/// Only the hot key, no churn, and a clock that moves while the threads
/// run: every thread sees times in its own order, some older than others'
/// (as callers preempted between reading the clock and checking), and the
/// store admits exactly what one caller checking at the latest times
/// would: the burst plus one per emission interval passed.
#[test]
fn a_hot_key_on_a_moving_clock_admits_exactly_its_quota() {
    // 1 per ms, burst 100; the clock moves 50 ms over the run.
    let gcra = Gcra::with_burst(1_000, Duration::from_secs(1), 100).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(1)
        .build()
        .unwrap();
    let admitted = AtomicU64::new(0);
    let start = Barrier::new(THREADS);
    let ms = 1_000_000u64;
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (store, admitted, start) = (&store, &admitted, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..TRIES as u64 {
                    // Up to 50 ms; each thread lags the others a little.
                    let now = NOW + (i * 50 * ms / TRIES as u64).saturating_sub(thread as u64);
                    if store.check(&7, 1, now).value().unwrap().allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // The latest time any thread used is NOW + 50 ms - 25 us (i = TRIES -
    // 1, thread 0): 49 intervals passed after the burst's 100 at NOW.
    assert_eq!(admitted.into_inner(), 100 + 49);
}

/// Threads check one hot key (so its state lives beside the shard's lock)
/// while another thread grows the same shard with new keys and runs upkeep
/// passes: the hot key still admits exactly its burst.
#[test]
fn a_hot_key_admits_exactly_its_burst_while_its_shard_grows() {
    let gcra = Gcra::with_burst(10, Duration::from_secs(1), 500).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(1)
        .build()
        .unwrap();
    let admitted = checks_while_growing(&store, TRIES as u64, |_, _| 42, 1_000..21_000);
    assert_eq!(admitted, 500);
    assert_eq!(store.len(), 20_001);
}

/// Threads cycle over many keys, each used up, so most checks are
/// denials decided by reading the shard, while another thread inserts new
/// keys into the same shards (growing their tables) and runs upkeep
/// passes: every key admits exactly its burst, and the reads see every
/// admission.
#[test]
fn denials_read_while_the_shards_grow_admit_exactly_the_bursts() {
    // Each thread visits every key 8 times: all bursts are used up.
    bursts_while_growing(1_000, 3, |thread, i| (i + thread * 97) % 1_000);
}

/// Runs `THREADS` threads of `tries` cost-1 checks at `NOW` (thread `t`'s
/// `i`-th of key `key(t, i)`), while another thread inserts the keys
/// `grow` (each admitted) and runs upkeep passes. Returns the number the
/// checking threads had admitted.
fn checks_while_growing<A: Algorithm>(
    store: &MemoryStore<A, u64>,
    tries: u64,
    key: impl Fn(u64, u64) -> u64 + Sync,
    grow: std::ops::Range<u64>,
) -> u64 {
    let admitted = AtomicU64::new(0);
    let start = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for thread in 0..THREADS as u64 {
            let (admitted, start, key) = (&admitted, &start, &key);
            s.spawn(move || {
                start.wait();
                for i in 0..tries {
                    if store
                        .check(&key(thread, i), 1, NOW)
                        .value()
                        .unwrap()
                        .allowed
                    {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            start.wait();
            for key in grow {
                assert!(store.check(&key, 1, NOW).value().unwrap().allowed);
                if key % 100 == 0 {
                    store.maintain(NOW);
                }
                if key % 5_000 == 0 {
                    store.sweep(NOW);
                }
            }
        });
    });
    admitted.into_inner()
}

/// Threads admit many keys at once, all on the same key at the same time
/// (each key's state moving to its shard's hot slot and back, denials
/// decided by reading among admissions through the lock), while another
/// thread grows the shards and runs upkeep passes: every key admits
/// exactly its burst.
#[test]
fn admissions_racing_on_each_key_while_the_shards_grow_admit_exactly_the_bursts() {
    // Every thread on the same key for 32 checks in a row, all moving
    // through the keys together: they race on each one.
    bursts_while_growing(200, 50, |_, i| (i / 32) % 200);
}

/// Keys `0..keys` of burst `burst` (1 an hour), checked by
/// [`checks_while_growing`] (`4 * TRIES` checks a thread, of `key(thread,
/// i)`): exactly every burst is admitted, and every key is then denied.
fn bursts_while_growing(keys: u64, burst: u64, key: impl Fn(u64, u64) -> u64 + Sync) {
    let gcra = Gcra::with_burst(1, Duration::from_secs(3600), burst).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(2)
        .build()
        .unwrap();
    let admitted = checks_while_growing(&store, TRIES as u64 * 4, key, 10_000..30_000);
    assert_eq!(admitted, keys * burst);
    for key in 0..keys {
        assert!(!store.check(&key, 1, NOW).value().unwrap().allowed);
    }
}

/// Many keys on a moving clock, each thread's times a little behind the
/// others' (callers preempted between reading the clock and checking):
/// no key admits more than its burst plus one per interval up to the
/// latest time any thread used, and none is starved.
#[test]
fn many_keys_on_a_moving_clock_admit_at_most_their_quota() {
    const KEYS: u64 = 64;
    // 1 per ms, burst 5; the clock moves 20 ms over the run.
    let gcra = Gcra::with_burst(1_000, Duration::from_secs(1), 5).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(4)
        .build()
        .unwrap();
    let admitted: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let start = Barrier::new(THREADS);
    let ms = 1_000_000u64;
    std::thread::scope(|s| {
        for thread in 0..THREADS as u64 {
            let (store, admitted, start) = (&store, &admitted, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..TRIES as u64 * 2 {
                    let now =
                        NOW + (i * 20 * ms / (TRIES as u64 * 2)).saturating_sub(thread * 1_000);
                    let key = (i + thread) % KEYS;
                    if store.check(&key, 1, now).value().unwrap().allowed {
                        admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // The latest time used is under NOW + 20 ms: at most 5 + 20 each.
    for (key, n) in admitted.iter().enumerate() {
        let n = n.load(Ordering::Relaxed);
        assert!((5..=25).contains(&n), "key {key}: {n}");
    }
}
