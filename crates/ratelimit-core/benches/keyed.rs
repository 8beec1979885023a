//! Keyed GCRA check: `ratelimit-core`'s [`MemoryStore`] against
//! `governor`'s keyed limiter (its default DashMap store), in one run.
//!
//! Cases: one hot key, 10,000 keys and 1,000,000 keys (pre-populated, keys
//! cycled); the allowed and the denied path; 1, 2, 4 and 8 threads (on
//! two cores, 4 and 8 show how contention grows); each
//! limiter's default production clock (`SystemClock` for us, `QuantaClock`
//! for governor) and a frozen clock for both (`ManualClock`,
//! `FakeRelativeClock`), which compares the algorithm and store alone.
//! Each group benches ours then governor's, back to back, with the same
//! quota and `u64` keys.
//!
//! Before the timings it prints the bytes allocated per key at 1,000,000
//! keys for both, counted by a global allocator.
//!
//! `cargo bench -p ratelimit-core --bench keyed`

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use governor::clock::{Clock as _, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store, SystemClock};
use ratelimit_test_support::CountingAlloc;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Counts live heap bytes, to measure memory per key.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const KEY_COUNTS: [usize; 3] = [1, 10_000, 1_000_000];
const THREADS: [usize; 4] = [1, 2, 4, 8];

/// The `i`-th key: a bijection of `i`, so keys are distinct and spread.
#[inline(always)]
fn key(i: usize) -> u64 {
    (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// 10 per second with a burst of `u32::MAX`: every check is admitted.
    Allowed,
    /// 1 per hour, burst 1, each key used once beforehand: every check is
    /// denied.
    Denied,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Allowed => "allowed",
            Path::Denied => "denied",
        }
    }

    fn ours(self) -> Gcra {
        match self {
            Path::Allowed => {
                Gcra::with_burst(10, Duration::from_secs(1), u64::from(u32::MAX)).unwrap()
            }
            Path::Denied => Gcra::new(1, Duration::from_secs(3600)).unwrap(),
        }
    }

    fn governor(self) -> Quota {
        match self {
            Path::Allowed => {
                Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::MAX)
            }
            Path::Denied => Quota::per_hour(NonZeroU32::new(1).unwrap()),
        }
    }

    /// The cost each key is pre-populated with: enough to keep every key's
    /// state non-full (so it stays in our store) for the whole run.
    fn prefill(self) -> u32 {
        match self {
            Path::Allowed => 10_000,
            Path::Denied => 1,
        }
    }
}

/// Every path and key count, or with `KEYED_ONLY=allowed/1/` only those
/// whose `path/keys/` starts so (a quick look at one group of rows).
fn cases() -> impl Iterator<Item = (Path, usize)> {
    let only = std::env::var("KEYED_ONLY").unwrap_or_default();
    [Path::Allowed, Path::Denied]
        .into_iter()
        .flat_map(|path| KEY_COUNTS.map(|nkeys| (path, nkeys)))
        .filter(move |(path, nkeys)| format!("{}/{nkeys}/", path.name()).starts_with(&only))
}

/// Runs `iters` checks on each of `threads` threads over `nkeys` keys
/// (thread `t` starts at key `t * nkeys / threads`), and returns the wall
/// time.
fn run<F: Fn(u64) + Sync>(iters: u64, threads: usize, nkeys: usize, check: &F) -> Duration {
    let work = |start: usize| {
        let mut i = start;
        for _ in 0..iters {
            check(key(i));
            i += 1;
            if i == nkeys {
                i = 0;
            }
        }
        iters
    };
    let t0 = Instant::now();
    on_threads(threads, nkeys, &work);
    t0.elapsed()
}

/// Runs `work` on each of `threads` threads, thread `t` from key
/// `t * nkeys / threads`, and sums what they return. One thread's work
/// runs on the calling thread: a thread spawned for each slice may land
/// on either core, and one side's slices on a slower one.
fn on_threads<W: Fn(usize) -> u64 + Sync>(threads: usize, nkeys: usize, work: &W) -> u64 {
    if threads == 1 {
        return work(0);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || work(t * nkeys / threads)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

fn ours<C: Clock>(path: Path, nkeys: usize, clock: &C) -> MemoryStore<Gcra, u64> {
    // No cap: a million keys fit.
    let store = MemoryStore::builder(path.ours())
        .max_keys(None)
        .build()
        .unwrap();
    for i in 0..nkeys {
        let d = store
            .check(&key(i), path.prefill().into(), clock.now())
            .value()
            .unwrap();
        assert!(d.allowed);
    }
    assert_eq!(store.len(), nkeys);
    store
}

/// Governor's keyed limiter with its default store (DashMap) on clock `C`.
type Governor<C> = RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    C,
    NoOpMiddleware<<C as governor::clock::Clock>::Instant>,
>;

fn governor<C: governor::clock::Clock>(
    path: Path,
    nkeys: usize,
    make: impl Fn(Quota) -> Governor<C>,
) -> Governor<C> {
    let limiter = make(path.governor());
    let n = NonZeroU32::new(path.prefill()).unwrap();
    for i in 0..nkeys {
        assert!(matches!(limiter.check_key_n(&key(i), n), Ok(Ok(()))));
    }
    assert_eq!(limiter.len(), nkeys);
    limiter
}

/// Checks that the benchmarked path is the one named: the next check of
/// the first key is admitted (or denied) by both.
fn assert_path<C: Clock, G: governor::clock::Clock>(
    path: Path,
    store: &MemoryStore<Gcra, u64>,
    clock: &C,
    limiter: &Governor<G>,
) {
    let allowed = path == Path::Allowed;
    assert_eq!(
        store
            .check(&key(0), 1, clock.now())
            .value()
            .unwrap()
            .allowed,
        allowed
    );
    assert_eq!(limiter.check_key(&key(0)).is_ok(), allowed);
}

fn bench_clock<C: Clock, G: governor::clock::Clock + Sync>(
    c: &mut Criterion,
    clock_name: &str,
    our_clock: &C,
    make_governor: impl Fn(Quota) -> Governor<G> + Copy,
) {
    for (path, nkeys) in cases() {
        let store = ours(path, nkeys, our_clock);
        let limiter = governor(path, nkeys, make_governor);
        for threads in THREADS {
            let mut group = c.benchmark_group(format!("{clock_name}/{}/{threads}t", path.name()));
            group.throughput(Throughput::Elements(threads as u64));
            group.bench_function(BenchmarkId::new("ours", nkeys), |b| {
                b.iter_custom(|iters| {
                    run(iters, threads, nkeys, &|k| {
                        let _ = black_box(store.check(&k, 1, our_clock.now()).value());
                    })
                })
            });
            group.bench_function(BenchmarkId::new("governor", nkeys), |b| {
                b.iter_custom(|iters| {
                    run(iters, threads, nkeys, &|k| {
                        let _ = black_box(limiter.check_key(&k));
                    })
                })
            });
            group.finish();
        }
        assert_path(path, &store, our_clock, &limiter);
    }
}

/// Runs checks on each of `threads` threads over `nkeys` keys for about
/// `time`, and returns the number of checks and the wall time.
fn run_for<F: Fn(u64) + Sync>(
    time: Duration,
    threads: usize,
    nkeys: usize,
    check: &F,
) -> (u64, Duration) {
    let work = |start: usize| {
        let t0 = Instant::now();
        let (mut i, mut done) = (start, 0u64);
        while t0.elapsed() < time {
            for _ in 0..1024 {
                check(key(i));
                i += 1;
                if i == nkeys {
                    i = 0;
                }
            }
            done += 1024;
        }
        done
    };
    let t0 = Instant::now();
    let done = on_threads(threads, nkeys, &work);
    (done, t0.elapsed())
}

/// Checks per second of `a` and `b`, each the median of `ROUNDS` slices of
/// `SLICE`, run alternately (ABBA...) so that background load falls on both
/// alike; and the quartiles of the per-round ratio `a / b` (each round's
/// two slices are adjacent in time).
fn interleaved<F: Fn(u64) + Sync, G: Fn(u64) + Sync>(
    threads: usize,
    nkeys: usize,
    a: &F,
    b: &G,
) -> (f64, f64, [f64; 3]) {
    const ROUNDS: usize = 24;
    const SLICE: Duration = Duration::from_millis(40);
    let rate = |(n, t): (u64, Duration)| n as f64 / t.as_secs_f64();
    let (mut ra, mut rb, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    // Warm up both.
    run_for(SLICE, threads, nkeys, a);
    run_for(SLICE, threads, nkeys, b);
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = rate(run_for(SLICE, threads, nkeys, a));
            (x, rate(run_for(SLICE, threads, nkeys, b)))
        } else {
            let y = rate(run_for(SLICE, threads, nkeys, b));
            (rate(run_for(SLICE, threads, nkeys, a)), y)
        };
        ra.push(x);
        rb.push(y);
        ratio.push(x / y);
    }
    let quantile = |v: &mut Vec<f64>, q: usize| {
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) * q / 4]
    };
    let quartiles = [
        quantile(&mut ratio, 1),
        quantile(&mut ratio, 2),
        quantile(&mut ratio, 3),
    ];
    (quantile(&mut ra, 2), quantile(&mut rb, 2), quartiles)
}

/// The interleaved comparison of every case, printed as a Markdown table.
fn interleaved_table<C: Clock, G: governor::clock::Clock + Sync>(
    clock_name: &str,
    our_clock: &C,
    make_governor: impl Fn(Quota) -> Governor<G> + Copy,
) {
    println!("\n{clock_name}, interleaved (24 alternating 40 ms slices each):\n");
    println!("| path | keys | threads | ours ns/check | governor ns/check | ours checks/s | governor checks/s | ours faster by | quartiles |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (path, nkeys) in cases() {
        let store = ours(path, nkeys, our_clock);
        let limiter = governor(path, nkeys, make_governor);
        for threads in THREADS {
            let (o, g, q) = interleaved(
                threads,
                nkeys,
                &|k| {
                    let _ = black_box(store.check(&k, 1, our_clock.now()).value());
                },
                &|k| {
                    let _ = black_box(limiter.check_key(&k));
                },
            );
            // ns per check per thread: wall time each check takes.
            let ns = |r: f64| 1e9 * threads as f64 / r;
            let pct = |r: f64| (r - 1.0) * 100.0;
            println!(
                    "| {} | {nkeys} | {threads} | {:.1} | {:.1} | {:.2} M | {:.2} M | {:+.0} % | {:+.0} / {:+.0} % |",
                    path.name(),
                    ns(o),
                    ns(g),
                    o / 1e6,
                    g / 1e6,
                    pct(q[1]),
                    pct(q[0]),
                    pct(q[2]),
                );
        }
        assert_path(path, &store, our_clock, &limiter);
    }
}

/// Live bytes allocated by `build`'s result, per key.
fn bytes_per_key<T>(nkeys: usize, build: impl FnOnce() -> T) -> f64 {
    let before = ALLOC.allocated();
    let value = build();
    let after = ALLOC.allocated();
    drop(value);
    (after as f64 - before as f64) / nkeys as f64
}

fn memory() {
    let n = 1_000_000;
    for path in [Path::Allowed, Path::Denied] {
        let ours = bytes_per_key(n, || ours(path, n, &SystemClock::new()));
        let gov = bytes_per_key(n, || governor(path, n, RateLimiter::keyed));
        println!(
            "memory/{}/{n} keys: ours {ours:.1} bytes per key, governor {gov:.1} bytes per key",
            path.name()
        );
    }
}

fn benches(c: &mut Criterion) {
    // `KEYED_CRITERION_ONLY=1` skips the memory count and the interleaved
    // tables (for profiling one criterion case).
    if std::env::var_os("KEYED_CRITERION_ONLY").is_none() {
        if std::env::var_os("KEYED_ONLY").is_none() {
            memory();
        }
        interleaved_table("system-clock", &SystemClock::new(), RateLimiter::keyed);
        interleaved_table("frozen-clock", &ManualClock::new(), |quota| {
            RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default())
        });
    }
    // `KEYED_TABLES_ONLY=1` stops after the interleaved tables.
    if std::env::var_os("KEYED_TABLES_ONLY").is_some() {
        return;
    }
    bench_clock(c, "system-clock", &SystemClock::new(), RateLimiter::keyed);
    bench_clock(c, "frozen-clock", &ManualClock::new(), |quota| {
        RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default())
    });
    // The clocks alone, for reference.
    let mut group = c.benchmark_group("clock");
    let system = SystemClock::new();
    group.bench_function("ours-system", |b| b.iter(|| black_box(system.now())));
    let quanta = governor::clock::DefaultClock::default();
    group.bench_function("governor-quanta", |b| b.iter(|| black_box(quanta.now())));
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .without_plots()
        .configure_from_args();
    benches(&mut c);
    c.final_summary();
}
