//! The memory test: a million keys, then time passes, and the store is back
//! near its baseline; then a capped store under a flood of keys past its
//! cap holds what it keeps of evicted keys within its bound.
//!
//! Allocated bytes are counted by a `#[global_allocator]` wrapper around
//! `std::alloc::System`, so this is its own test binary (the counter sees
//! the whole process) with a single test.

use ratelimit_core::store::Upkeep;
use ratelimit_core::{Gcra, MemoryStore, Store};
use ratelimit_test_support::CountingAlloc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

fn allocated() -> usize {
    GLOBAL.allocated()
}

const KEYS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

#[test]
fn a_million_keys_come_and_go() {
    // 10 per second: one request leaves a key's state non-full for 100ms.
    let gcra = Gcra::new(10, Duration::from_secs(1)).unwrap();
    // A fixed shard count keeps the table sizes the same on every machine;
    // no cap, so that a million keys fit.
    let store = MemoryStore::<Gcra, u64>::builder(gcra)
        .shards(8)
        .max_keys(None)
        .build()
        .unwrap();
    let baseline = allocated();

    for key in 0..KEYS {
        assert!(store.check(&key, 1, 0).value().unwrap().allowed);
    }
    assert_eq!(store.len(), KEYS as usize);
    let full = allocated() - baseline;
    // 8-byte key + 8-byte state per slot, at a load factor of at most 7/8.
    assert!(full >= 16 * KEYS as usize, "{full} bytes for {KEYS} keys");
    assert!(full <= 64 * KEYS as usize, "{full} bytes for {KEYS} keys");

    // Past the period every state is full again. New keys make the shards
    // drop the old ones instead of growing.
    for key in KEYS..2 * KEYS {
        assert!(store.check(&key, 1, 2 * SEC).value().unwrap().allowed);
    }
    assert!(store.len() <= KEYS as usize, "{} keys", store.len());
    let lazily = allocated() - baseline;
    assert!(
        lazily <= full + full / 8,
        "the table grew from {full} to {lazily} bytes"
    );
    // Old keys are back to full: the same decision as a fresh key.
    let d = store.check(&7, 0, 2 * SEC).value().unwrap();
    assert_eq!(d.remaining, 10);

    // Past the period again, bounded upkeep steps (what the HTTP layer
    // runs every second) drop everything and give memory back, with no
    // request arriving.
    let mut steps = 0;
    while !store.is_empty() {
        store.maintain(4 * SEC);
        steps += 1;
        assert!(steps <= 64, "{} keys left after {steps} steps", store.len());
    }
    store.maintain(4 * SEC);
    let after = allocated().saturating_sub(baseline);
    assert!(
        after <= 64 * 1024,
        "{after} bytes left above the baseline after {steps} upkeep steps (peak {full})"
    );

    // A flood again, then a whole sweep does the same at once.
    for key in 0..KEYS {
        assert!(store.check(&key, 1, 6 * SEC).value().unwrap().allowed);
    }
    assert_eq!(store.sweep(8 * SEC), 0);
    assert_eq!(store.len(), 0);
    assert!(store.is_empty());
    let swept = allocated().saturating_sub(baseline);
    eprintln!(
        "baseline {baseline} B; 1M keys +{full} B; 1M more after the period +{lazily} B; \
         after {steps} upkeep steps +{after} B; after sweep +{swept} B"
    );
    assert!(
        swept <= 64 * 1024,
        "{swept} bytes left above the baseline (peak {full})"
    );
    drop(store);
    a_flood_past_the_cap_keeps_its_evicted_keys_within_the_bound();
}

/// A store capped at 10,000 keys under 1,500,000 new keys at one instant
/// (every key evicted is still in use): past the bound of the set of
/// evicted keys. Beside its table it holds at most 320 bytes per capped
/// key: 256 of fingerprints and two rows of 16-byte cells (rounded up to
/// a power of two a shard). After the period, upkeep frees the
/// fingerprints; the cells stay.
fn a_flood_past_the_cap_keeps_its_evicted_keys_within_the_bound() {
    const CAP: usize = 10_000;
    let gcra = Gcra::new(10, Duration::from_secs(1)).unwrap();
    let baseline = allocated();
    let store = MemoryStore::<Gcra, u64>::builder(gcra)
        .shards(32)
        .max_keys(Some(CAP))
        .build()
        .unwrap();
    for key in 0..CAP as u64 {
        assert!(store.check(&key, 1, 0).value().unwrap().allowed);
    }
    let table = allocated() - baseline;
    for key in CAP as u64..150 * CAP as u64 {
        store.check(&key, 1, 0).value().unwrap();
    }
    assert!(store.len() <= CAP);
    let counts = store.counts().unwrap();
    assert!(counts.evicted >= 80 * CAP as u64, "{counts:?}");
    assert!(counts.refused > 0, "past the set's bound: {counts:?}");
    let flooded = allocated() - baseline;
    let evicted = flooded.saturating_sub(table);
    assert!(evicted <= 320 * CAP, "{evicted} bytes for a cap of {CAP}");

    // Past the period (100 ms), the generations go with upkeep.
    store.maintain(SEC);
    let aged = allocated() - baseline;
    assert!(
        aged.saturating_sub(table) <= 64 * CAP,
        "{aged} bytes after the period, {table} for the table"
    );
    eprintln!("cap {CAP}: table {table} B, flooded +{evicted} B, aged {aged} B; {counts:?}");
}
