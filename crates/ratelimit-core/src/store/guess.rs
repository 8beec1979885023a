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
}

/// Records whether this thread's check was admitted at a cost (every
/// check path calls it after its decision). Written only when it changes:
/// a run of admissions, or of denials, stores nothing here.
#[inline(always)]
pub(super) fn admitted(wrote: bool) {
    ADMITTED.with(|c| {
        if c.get() != wrote {
            c.set(wrote);
        }
    });
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
