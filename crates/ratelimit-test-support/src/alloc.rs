//! [`CountingAlloc`]: `std::alloc::System`, counting the bytes currently
//! allocated, to measure memory per key.
//!
//! A global allocator sees the whole process, so a test using it is its
//! own test binary, and declares the static itself:
//!
//! ```
//! use ratelimit_test_support::CountingAlloc;
//!
//! #[global_allocator]
//! static GLOBAL: CountingAlloc = CountingAlloc::new();
//!
//! let before = GLOBAL.allocated();
//! let v = vec![0u8; 4096];
//! assert!(GLOBAL.allocated() >= before + 4096);
//! drop(v);
//! ```

// A `GlobalAlloc` impl must be `unsafe impl`. The workspace denies (rather
// than forbids) `unsafe_code` so that this one module can allow it; the
// published crates have no unsafe code.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `System`, counting the bytes currently allocated.
///
/// ```
/// use ratelimit_test_support::CountingAlloc;
///
/// // Counts only as the process's `#[global_allocator]` (see the module docs).
/// static COUNTER: CountingAlloc = CountingAlloc::new();
/// assert_eq!(COUNTER.allocated(), 0);
/// ```
#[derive(Debug, Default)]
pub struct CountingAlloc {
    allocated: AtomicUsize,
}

impl CountingAlloc {
    /// A counter at zero (`const`, for a `static`).
    pub const fn new() -> Self {
        Self {
            allocated: AtomicUsize::new(0),
        }
    }

    /// The bytes allocated through it and not yet freed.
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// which uphold `GlobalAlloc`'s contract; the counter has no effect on the
// memory returned.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        self.allocated.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.allocated.fetch_sub(layout.size(), Ordering::Relaxed);
            self.allocated.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}
