//! The memory test: a million keys, then time passes, and the store is back
//! near its baseline.
//!
//! Allocated bytes are counted by a `#[global_allocator]` wrapper around
//! `std::alloc::System`, so this is its own test binary (the counter sees
//! the whole process) with a single test.

// A `GlobalAlloc` impl must be `unsafe impl`. The workspace denies (rather
// than forbids) `unsafe_code` so that this one test file can allow it; the
// library itself has no unsafe code.
#![allow(unsafe_code)]

use ratelimit_core::{Gcra, MemoryStore};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// `System`, counting the bytes currently allocated.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments,
// which uphold `GlobalAlloc`'s contract; the counter has no effect on the
// memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
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
        assert!(store.check_sync(&key, 1, 0).unwrap().allowed);
    }
    assert_eq!(store.len(), KEYS as usize);
    let full = allocated() - baseline;
    // 8-byte key + 8-byte state per slot, at a load factor of at most 7/8.
    assert!(full >= 16 * KEYS as usize, "{full} bytes for {KEYS} keys");
    assert!(full <= 64 * KEYS as usize, "{full} bytes for {KEYS} keys");

    // Past the period every state is full again. New keys make the shards
    // drop the old ones instead of growing.
    for key in KEYS..2 * KEYS {
        assert!(store.check_sync(&key, 1, 2 * SEC).unwrap().allowed);
    }
    assert!(store.len() <= KEYS as usize, "{} keys", store.len());
    let lazily = allocated() - baseline;
    assert!(
        lazily <= full + full / 8,
        "the table grew from {full} to {lazily} bytes"
    );
    // Old keys are back to full: the same decision as a fresh key.
    let d = store.check_sync(&7, 0, 2 * SEC).unwrap();
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
        assert!(store.check_sync(&key, 1, 6 * SEC).unwrap().allowed);
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
