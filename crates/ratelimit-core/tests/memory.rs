//! The memory test: a million keys, then time passes, and the store is back
//! near its baseline.
//!
//! Allocated bytes are counted by a `#[global_allocator]` wrapper around
//! `std::alloc::System`, so this is its own test binary (the counter sees
//! the whole process) with a single test.

use ratelimit_core::{Gcra, MemoryStore};
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
    // A fixed shard count keeps the table sizes the same on every machine.
    let store = MemoryStore::<Gcra, u64>::builder(gcra).shards(8).build();
    let baseline = allocated();

    for key in 0..KEYS {
        assert!(store.check_now(&key, 1, 0).unwrap().allowed);
    }
    assert_eq!(store.len(), KEYS as usize);
    let full = allocated() - baseline;
    // 8-byte key + 8-byte state per slot, at a load factor of at most 7/8.
    assert!(full >= 16 * KEYS as usize, "{full} bytes for {KEYS} keys");
    assert!(full <= 64 * KEYS as usize, "{full} bytes for {KEYS} keys");

    // Past the period every state is full again. New keys make the shards
    // drop the old ones instead of growing.
    for key in KEYS..2 * KEYS {
        assert!(store.check_now(&key, 1, 2 * SEC).unwrap().allowed);
    }
    assert!(store.len() <= KEYS as usize, "{} keys", store.len());
    let lazily = allocated() - baseline;
    assert!(
        lazily <= full + full / 8,
        "the table grew from {full} to {lazily} bytes"
    );
    // Old keys are back to full: the same decision as a fresh key.
    let d = store.check_now(&7, 0, 2 * SEC).unwrap();
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
        assert!(store.check_now(&key, 1, 6 * SEC).unwrap().allowed);
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
}
