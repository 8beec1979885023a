//! Admissions on the frozen clock by `MemoryStore<Gcra, u64>` at several
//! shard counts and by governor's keyed limiter, in alternating rounds, so
//! that the host's states (see BENCHMARKS.md, "Keyed check") fall on every
//! store alike: each round runs 400,000 checks per thread of each in turn,
//! over keys cycled in order as in `benches/keyed.rs`, and prints its
//! time per check per thread.
//!
//! `shard_count ROUNDS THREADS KEYS SHARDS...`, e.g.
//! `shard_count 1500 2 10000 16 32 64 128`.
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Checks per thread in each store's round.
const PER_ROUND: usize = 400_000;

/// The `i`-th key, as in `benches/keyed.rs`.
fn key(i: usize) -> u64 {
    (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Nanoseconds per check per thread of `n` checks on each of `threads`
/// threads (thread `t` starts at key `t * nkeys / threads`).
fn round(threads: usize, n: usize, nkeys: usize, check: &(impl Fn(u64) + Sync)) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            s.spawn(move || {
                let start = th * nkeys / threads;
                (0..nkeys)
                    .cycle()
                    .skip(start)
                    .take(n)
                    .for_each(|i| check(key(i)));
            });
        }
    });
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let usage = "usage: shard_count ROUNDS THREADS KEYS SHARDS... (whole numbers above 0, \
                 at most 1024 threads and 65536 shards)";
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    let [rounds, threads, nkeys, ref counts @ ..] = args[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let bad = |n: usize, max: usize| n == 0 || n > max;
    if bad(rounds, usize::MAX)
        || bad(threads, 1024)
        || bad(nkeys, usize::MAX)
        || counts.is_empty()
        || counts.iter().any(|&c| bad(c, 1 << 16))
    {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    // Every check must be admitted: each key's burst covers its checks.
    let per_key = (rounds as u128 * PER_ROUND as u128 * threads as u128).div_ceil(nkeys as u128);
    if per_key + 10_000 > u128::from(u32::MAX) {
        eprintln!("{rounds} rounds of {threads} threads over {nkeys} keys: too many checks a key");
        std::process::exit(2);
    }
    let gcra = Gcra::with_burst(10, Duration::from_secs(1), u64::from(u32::MAX)).unwrap();
    let quota = Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::MAX);
    let clock = ManualClock::new();
    let stores: Vec<_> = counts
        .iter()
        .map(|&s| MemoryStore::builder(gcra).shards(s).build().unwrap())
        .collect();
    let limiter = RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default());
    let n = NonZeroU32::new(10_000).unwrap();
    for i in 0..nkeys {
        for s in &stores {
            assert!(s.check(&key(i), 10_000, 0).value().unwrap().allowed);
        }
        assert!(matches!(limiter.check_key_n(&key(i), n), Ok(Ok(()))));
    }
    let t0 = Instant::now();
    for r in 0..rounds {
        let mut line = format!("{:7.2} r{r}", t0.elapsed().as_secs_f64());
        for (s, c) in stores.iter().zip(counts) {
            let ns = round(threads, PER_ROUND, nkeys, &|k| {
                black_box(s.check(&k, 1, clock.now()).value()).ok();
            });
            line += &format!(" s{c}={ns:.1}");
        }
        let ns = round(threads, PER_ROUND, nkeys, &|k| {
            black_box(limiter.check_key(&k)).ok();
        });
        line += &format!(" gov={ns:.1}");
        println!("{line}");
    }
}
