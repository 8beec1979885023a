//! Single-threaded time per check of `MemoryStore<Gcra, u64>` and of
//! governor's keyed limiter on the frozen clock, as the minimum and
//! percentiles over many short rounds: a round that another process
//! interrupted only raises the upper percentiles, so the minimum stays
//! comparable on a busy machine, where the interleaved medians of
//! `benches/keyed.rs` do not.
//!
//! `check_min PATH KEYS`, e.g. `check_min denied 10000`: PATH is `allowed`
//! or `denied` (the quotas of `benches/keyed.rs`); each round runs 10,000
//! checks (or KEYS, if fewer) of ours, then of governor's, over the keys
//! cycled in order, from where the previous round stopped.

use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Rounds timed, after `WARM` rounds that are not.
const ROUNDS: usize = 400;
const WARM: usize = 20;

/// The `i`-th key, as in `benches/keyed.rs`.
fn key(i: usize) -> u64 {
    (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Nanoseconds per check of `n` checks of `check` from key `start` on.
fn round(start: usize, n: usize, nkeys: usize, check: &impl Fn(u64)) -> f64 {
    let t = Instant::now();
    let mut i = start;
    for _ in 0..n {
        check(key(i));
        i += 1;
        if i == nkeys {
            i = 0;
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// The `p`-th percentile of sorted `v`.
fn percentile(v: &[f64], p: usize) -> f64 {
    v[(v.len() - 1) * p / 100]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(Ok(nkeys))) = (args.first(), args.get(1).map(|k| k.parse::<usize>()))
    else {
        eprintln!("usage: check_min allowed|denied KEYS");
        std::process::exit(2);
    };
    let (gcra, quota, prefill) = match path.as_str() {
        "allowed" => (
            Gcra::with_burst(10, Duration::from_secs(1), u64::from(u32::MAX)).unwrap(),
            Quota::per_second(NonZeroU32::new(10).unwrap()).allow_burst(NonZeroU32::MAX),
            10_000,
        ),
        _ => (
            Gcra::new(1, Duration::from_secs(3600)).unwrap(),
            Quota::per_hour(NonZeroU32::new(1).unwrap()),
            1,
        ),
    };
    let clock = ManualClock::new();
    let store = MemoryStore::new(gcra);
    let limiter = RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default());
    let n = NonZeroU32::new(prefill).unwrap();
    for i in 0..nkeys.max(1) {
        assert!(
            store
                .check(&key(i), n.get().into(), 0)
                .value()
                .unwrap()
                .allowed
        );
        assert!(matches!(limiter.check_key_n(&key(i), n), Ok(Ok(()))));
    }
    let nkeys = nkeys.max(1);
    let ours = |k| {
        black_box(store.check(&k, 1, clock.now()).value()).ok();
    };
    let theirs = |k| {
        black_box(limiter.check_key(&k)).ok();
    };
    let chunk = nkeys.min(10_000);
    let (mut o, mut g) = (Vec::new(), Vec::new());
    let mut start = 0;
    for r in 0..ROUNDS + WARM {
        let (a, b) = (
            round(start, chunk, nkeys, &ours),
            round(start, chunk, nkeys, &theirs),
        );
        if r >= WARM {
            o.push(a);
            g.push(b);
        }
        start = (start + chunk) % nkeys;
    }
    o.sort_by(f64::total_cmp);
    g.sort_by(f64::total_cmp);
    let show = |v: &[f64]| {
        format!(
            "min {:.1} p10 {:.1} p50 {:.1}",
            v[0],
            percentile(v, 10),
            percentile(v, 50)
        )
    };
    println!(
        "{path} {nkeys} keys, ns/check: ours {} | governor {} | ours faster by {:+.0} % (min)",
        show(&o),
        show(&g),
        (g[0] / o[0] - 1.0) * 100.0
    );
}
