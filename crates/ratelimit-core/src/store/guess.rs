//! What a thread's latest checks did: the guesses a check makes before
//! it has read its key's state.
//!
//! Whether a check will be admitted is known only once its state is
//! read, but two things are chosen before: whether its key's bucket is
//! asked for with the intent to write (see `prefetch`), and whether it
//! first reads its shard without writing it (see `shard_lock`). Each
//! thread guesses from its own latest check, in thread-local cells that
//! only it writes. A wrong guess costs time, never a decision.
//!
//! (The cells are reached through `with`: `LocalKey::set` and `get` go
//! through a lazy-initialisation path that costs a dozen instructions a
//! call even for a `const` cell.)

use std::cell::Cell;

thread_local! {
    /// Whether this thread's latest check was admitted at a cost.
    static ADMITTED: Cell<bool> = const { Cell::new(true) };
    /// The hash of the key of this thread's latest denial decided by a
    /// read.
    static DENIED: Cell<u64> = const { Cell::new(0) };
    /// Checks left that this thread admits by compare-and-swap (see
    /// [`likely_shared`]).
    static SHARED: Cell<u32> = const { Cell::new(0) };
}

/// Checks a thread admits by compare-and-swap after one that found its
/// shard held or read by another thread.
const SHARED_FOR: u32 = 256;

/// Records whether this thread's check was admitted at a cost (every
/// check path calls it after its decision).
#[inline(always)]
pub(super) fn admitted(wrote: bool) {
    ADMITTED.with(|c| c.set(wrote));
}

/// Whether this thread's latest check was admitted at a cost: the guess
/// that its next one writes its key's state.
#[inline(always)]
pub(super) fn likely_admitted() -> bool {
    ADMITTED.with(Cell::get)
}

/// Records a denial of the key hashed `hash` decided by a read, and tells
/// whether this thread's previous such denial was of the same key (a key
/// denied again and again, which the deny slots should remember).
#[inline(always)]
pub(super) fn denied_again(hash: u64) -> bool {
    DENIED.with(|c| c.replace(hash)) == hash
}

/// Records that this thread's check found its shard held or read by
/// another thread: threads meet in the shards.
#[cold]
pub(super) fn contended() {
    SHARED.with(|c| c.set(SHARED_FOR));
}

/// Whether this thread's check of a one-word state should take the read
/// side and admit by compare-and-swap: true for the [`SHARED_FOR`] checks
/// after one that found its shard contended. A thread alone is better
/// served by the writer's side (one atomic operation, where the read side
/// and a swap take three); threads that meet are better served by the
/// swap, which writes no line another thread writes but the key's bucket.
#[inline(always)]
pub(super) fn likely_shared() -> bool {
    SHARED.with(|c| {
        let left = c.get();
        if left != 0 {
            c.set(left - 1);
        }
        left != 0
    })
}
