//! A driver for cache simulation of the keyed check: runs the paths of
//! `benches/keyed.rs` (allowed or denied, any number of keys, threads and
//! either clock) with `MemoryStore<Gcra, u64>`, so that a profiler can count
//! what one check reads and writes.
//!
//! `check_paths PATH KEYS THREADS CLOCK CHECKS`, e.g.
//! `check_paths denied 10000 2 system 200000`: PATH is `allowed` or
//! `denied`, CLOCK `system` or `frozen`, CHECKS the checks per thread. The
//! checks run in `checks`, which is never inlined, so that
//! `valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no
//! --toggle-collect='*check_paths*checks*'` counts them alone (see
//! BENCHMARKS.md, "Cache lines a check writes").

use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, SystemClock};
use std::hint::black_box;
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

/// The bench's quota for a path, and the cost each key is used with first.
fn quota(path: &str) -> (Gcra, u64) {
    match path {
        "allowed" => (
            Gcra::with_burst(10, Duration::from_secs(1), u64::from(u32::MAX)).unwrap(),
            10_000,
        ),
        "denied" => (Gcra::new(1, Duration::from_secs(3600)).unwrap(), 1),
        other => panic!("path {other}: expected allowed or denied"),
    }
}

/// `n` checks over `nkeys` keys from key `start` on, cycled.
#[inline(never)]
fn checks<C: Clock>(store: &MemoryStore<Gcra, u64>, clock: &C, start: usize, nkeys: usize, n: u64) {
    let mut i = start;
    for _ in 0..n {
        let _ = black_box(store.check_sync(&key(i), 1, clock.now()));
        i += 1;
        if i == nkeys {
            i = 0;
        }
    }
}

fn drive<C: Clock + Sync>(path: &str, nkeys: usize, threads: usize, clock: &C, n: u64) {
    let (gcra, prefill) = quota(path);
    let store = MemoryStore::new(gcra);
    for i in 0..nkeys {
        assert!(
            store
                .check_sync(&key(i), prefill, clock.now())
                .unwrap()
                .allowed
        );
    }
    eprintln!("mark {:p}", &MARK);
    MARK.store(1, Ordering::SeqCst);
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                // Where this thread's stack is, for the trace's reader.
                let here = 0u8;
                eprintln!("stack {:p}", black_box(&here));
                checks(store, clock, t * nkeys / threads, nkeys, n)
            });
        }
    });
    MARK.store(2, Ordering::SeqCst);
    let allowed = store.check_sync(&key(0), 1, clock.now()).unwrap().allowed;
    assert_eq!(allowed, path == "allowed", "the path is the one named");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, nkeys, threads, clock, n] = &args[..] else {
        eprintln!("usage: check_paths allowed|denied KEYS THREADS system|frozen CHECKS");
        std::process::exit(2);
    };
    let nkeys: usize = nkeys.parse().expect("KEYS");
    let threads: usize = threads.parse().expect("THREADS");
    let n: u64 = n.parse().expect("CHECKS");
    match clock.as_str() {
        "system" => drive(path, nkeys, threads, &SystemClock::new(), n),
        "frozen" => drive(path, nkeys, threads, &ManualClock::new(), n),
        other => panic!("clock {other}: expected system or frozen"),
    }
}
