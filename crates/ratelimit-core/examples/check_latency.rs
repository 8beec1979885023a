//! The time single checks take when several threads check at once:
//! `MemoryStore<Gcra, u64>` and governor's keyed limiter, admissions on
//! the frozen clock as in `benches/keyed.rs`, in alternating rounds.
//! Prints, per limiter, the checks per second of all threads and the
//! quantiles of one check's time (each check timed alone, so the figures
//! include the clock's own cost, some 20 to 40 ns).
//!
//! `check_latency ROUNDS THREADS KEYS`, e.g. `check_latency 6 4 1` (one
//! hot key admitted by 4 threads).
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Checks per thread in each limiter's round.
const PER_ROUND: usize = 1_000_000;

/// The `i`-th key, as in `benches/keyed.rs`.
fn key(i: usize) -> u64 {
    (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Runs `PER_ROUND` timed checks on each of `threads` threads; returns
/// the checks per second and every check's nanoseconds.
fn round(threads: usize, nkeys: usize, check: &(impl Fn(u64) + Sync)) -> (f64, Vec<u32>) {
    let t = Instant::now();
    let times: Vec<u32> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || {
                    let mut i = th * nkeys / threads;
                    let mut times = Vec::with_capacity(PER_ROUND);
                    for _ in 0..PER_ROUND {
                        let t0 = Instant::now();
                        check(key(i));
                        times.push(t0.elapsed().as_nanos().min(u32::MAX.into()) as u32);
                        i = (i + 1) % nkeys;
                    }
                    times
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let rate = times.len() as f64 / t.elapsed().as_secs_f64();
    (rate, times)
}

/// A line of the quantiles of `times` (sorted in place).
fn summary(rate: f64, times: &mut [u32]) -> String {
    times.sort_unstable();
    let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    let over = times.iter().filter(|&&t| t > 10_000).count();
    format!(
        "{:6.2} M/s  p50 {:5} ns  p99 {:6}  p99.9 {:6}  p99.99 {:7}  max {:8}  over 10 us: {over}",
        rate / 1e6,
        q(0.5),
        q(0.99),
        q(0.999),
        q(0.9999),
        times[times.len() - 1],
    )
}

/// The argument `name`, a whole number from 1 to `max`, or exits with
/// the usage.
fn parse(arg: Option<String>, name: &str, max: usize) -> usize {
    match arg.as_deref().map(str::parse::<usize>) {
        Some(Ok(n)) if (1..=max).contains(&n) => n,
        _ => {
            eprintln!(
                "usage: check_latency ROUNDS THREADS KEYS ({name}: a number from 1 to {max})"
            );
            std::process::exit(2);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds = parse(args.next(), "ROUNDS", usize::MAX);
    // Each thread keeps its round's times: 4 MB a thread.
    let threads = parse(args.next(), "THREADS", 256);
    let nkeys = parse(args.next(), "KEYS", usize::MAX);
    let burst = u64::from(u32::MAX);
    let clock = ManualClock::new();
    let store: MemoryStore<Gcra, u64> =
        MemoryStore::new(Gcra::with_burst(10, Duration::from_secs(1), burst).unwrap());
    let quota = Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::MAX);
    let governor = RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default());
    // Every check must be admitted: each key's burst covers its checks.
    let per_key = (rounds as u128 * threads as u128 * PER_ROUND as u128).div_ceil(nkeys as u128);
    if per_key >= u128::from(burst) {
        eprintln!("check_latency: {rounds} rounds of {threads} threads over {nkeys} keys: too many checks a key");
        std::process::exit(2);
    }
    for r in 0..rounds {
        let (rate, mut times) = round(threads, nkeys, &|k| {
            let _ = black_box(store.check(&k, 1, clock.now()).value());
        });
        println!("round {r} ours     {}", summary(rate, &mut times));
        let (rate, mut times) = round(threads, nkeys, &|k| {
            let _ = black_box(governor.check_key(&k));
        });
        println!("round {r} governor {}", summary(rate, &mut times));
    }
}
