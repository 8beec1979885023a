//! A driver for cache simulation of the keyed check: runs the paths of
//! `benches/keyed.rs` (allowed or denied, any number of keys, threads and
//! either clock) with `MemoryStore<Gcra, u64>`, or with governor's keyed
//! limiter, so that a profiler can count what one check reads and writes.
//!
//! `check_paths PATH KEYS THREADS CLOCK CHECKS [governor]`, e.g.
//! `check_paths denied 10000 2 system 200000`: PATH is `allowed` or
//! `denied`, CLOCK `system` or `frozen`, CHECKS the checks per thread. The
//! checks run in `checks`, which is never inlined, so that
//! `valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no
//! --toggle-collect='*check_paths*checks*'` counts them alone (see
//! BENCHMARKS.md, "Cache lines a check writes").

use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store, SystemClock};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Written just before the checks start and just after they end, so that
/// a memory trace (`valgrind --tool=lackey --trace-mem=yes`) can cut out
/// the checks: its address goes to stderr.
static MARK: AtomicU64 = AtomicU64::new(0);

/// The `i`-th key, as in `benches/keyed.rs`.
fn key(i: usize) -> u64 {
    (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The bench's quotas for a path (ours, governor's), and the cost each key
/// is used with first.
fn quota(path: &str) -> (Gcra, Quota, u32) {
    match path {
        "allowed" => (
            Gcra::with_burst(10, Duration::from_secs(1), u64::from(u32::MAX)).unwrap(),
            Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::MAX),
            10_000,
        ),
        "denied" => (
            Gcra::new(1, Duration::from_secs(3600)).unwrap(),
            Quota::per_hour(NonZeroU32::new(1).unwrap()),
            1,
        ),
        other => panic!("path {other}: expected allowed or denied"),
    }
}

/// `n` checks over `nkeys` keys from key `start` on, cycled; `check`
/// tells whether a key is admitted.
#[inline(never)]
fn checks<F: Fn(u64) -> bool>(check: &F, start: usize, nkeys: usize, n: u64) {
    let mut i = start;
    for _ in 0..n {
        black_box(check(key(i)));
        i += 1;
        if i == nkeys {
            i = 0;
        }
    }
}

/// Runs `n` checks on each of `threads` threads, between the marks, and
/// asserts that the path is the one named.
fn run<F: Fn(u64) -> bool + Sync>(path: &str, nkeys: usize, threads: usize, n: u64, check: F) {
    eprintln!("mark {:p}", &MARK);
    MARK.store(1, Ordering::SeqCst);
    std::thread::scope(|s| {
        for t in 0..threads {
            let check = &check;
            s.spawn(move || {
                // Where this thread's stack is, for the trace's reader.
                let here = 0u8;
                eprintln!("stack {:p}", black_box(&here));
                checks(check, t * nkeys / threads, nkeys, n)
            });
        }
    });
    MARK.store(2, Ordering::SeqCst);
    assert_eq!(
        check(key(0)),
        path == "allowed",
        "the path is the one named"
    );
}

fn ours<C: Clock + Sync>(path: &str, nkeys: usize, threads: usize, clock: &C, n: u64) {
    let (gcra, _, prefill) = quota(path);
    let store = MemoryStore::new(gcra);
    for i in 0..nkeys {
        let d = store.check(&key(i), prefill.into(), clock.now()).value();
        assert!(d.unwrap().allowed);
    }
    run(path, nkeys, threads, n, |k| {
        black_box(store.check(&k, 1, clock.now()).value())
            .map(|d| d.allowed)
            .unwrap_or(false)
    });
}

/// Governor's keyed limiter with its default store (DashMap) on clock `C`.
type Governor<C> = RateLimiter<
    u64,
    governor::state::keyed::DefaultKeyedStateStore<u64>,
    C,
    governor::middleware::NoOpMiddleware<<C as governor::clock::Clock>::Instant>,
>;

fn governor<C: governor::clock::Clock + Sync>(
    path: &str,
    nkeys: usize,
    threads: usize,
    n: u64,
    limiter: Governor<C>,
) {
    let prefill = NonZeroU32::new(quota(path).2).unwrap();
    for i in 0..nkeys {
        assert!(matches!(limiter.check_key_n(&key(i), prefill), Ok(Ok(()))));
    }
    run(path, nkeys, threads, n, |k| {
        black_box(limiter.check_key(&k)).is_ok()
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, nkeys, threads, clock, n, theirs) = match &args[..] {
        [p, k, t, c, n] => (p, k, t, c, n, false),
        [p, k, t, c, n, g] if g == "governor" => (p, k, t, c, n, true),
        _ => {
            eprintln!(
                "usage: check_paths allowed|denied KEYS THREADS system|frozen CHECKS [governor]"
            );
            std::process::exit(2);
        }
    };
    let nkeys: usize = nkeys.parse().expect("KEYS");
    let threads: usize = threads.parse().expect("THREADS");
    let n: u64 = n.parse().expect("CHECKS");
    let quota = quota(path).1;
    match (clock.as_str(), theirs) {
        ("system", false) => ours(path, nkeys, threads, &SystemClock::new(), n),
        ("frozen", false) => ours(path, nkeys, threads, &ManualClock::new(), n),
        ("system", true) => governor(path, nkeys, threads, n, RateLimiter::keyed(quota)),
        ("frozen", true) => {
            let clock = FakeRelativeClock::default();
            governor(
                path,
                nkeys,
                threads,
                n,
                RateLimiter::dashmap_with_clock(quota, clock),
            )
        }
        (other, _) => panic!("clock {other}: expected system or frozen"),
    }
}
