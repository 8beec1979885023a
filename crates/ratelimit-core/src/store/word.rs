//! A key's state in its bucket, and states of one word (`u64`) read and
//! swapped in place by checks that hold only their shard's read side.
//!
//! A state is written through `&mut` while the shard's writer holds it
//! (no reader then), and read through `&` while no one writes it. A
//! state of one word may also be read and swapped atomically by checks
//! that hold the shard's read side: the store then reads such states only
//! atomically on that side, so no plain access meets an atomic one
//! unordered (see `MemoryStore`'s docs and `shard_lock`).

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU64;

/// A key's state, in its bucket (see the module's docs).
#[repr(transparent)]
pub(super) struct StateCell<S>(UnsafeCell<S>);

// SAFETY: shared between threads only through the store's shards: a
// plain write needs `&mut` (the shard's writer, alone), a plain read
// happens while no thread writes (`read`'s contract), and the one write
// made through `&`, a compare-and-swap of a `u64` ([`word`]), is atomic,
// on a state that readers then only read atomically.
#[allow(unsafe_code)]
unsafe impl<S: Sync> Sync for StateCell<S> {}

impl<S> StateCell<S> {
    pub(super) fn new(state: S) -> Self {
        Self(UnsafeCell::new(state))
    }

    #[inline(always)]
    pub(super) fn get_mut(&mut self) -> &mut S {
        self.0.get_mut()
    }

    /// The state, read while no thread writes it: the caller holds its
    /// shard's read side, and states of this type are never swapped there
    /// (the store reads its states through [`word`] when they are).
    #[inline(always)]
    pub(super) fn read(&self) -> &S {
        // SAFETY: by the contract above, no write overlaps this borrow.
        #[allow(unsafe_code)]
        unsafe {
            &*self.0.get()
        }
    }
}

/// Whether states of type `S` are one word.
pub(super) fn is_word<S: 'static>() -> bool {
    TypeId::of::<S>() == TypeId::of::<u64>()
        && std::mem::align_of::<u64>() == std::mem::align_of::<AtomicU64>()
}

/// `cell`'s state as an atomic word, if states of type `S` are one word
/// (see [`is_word`]).
#[inline(always)]
pub(super) fn word<S: 'static>(cell: &StateCell<S>) -> Option<&AtomicU64> {
    if !is_word::<S>() {
        return None;
    }
    let at = cell.0.get().cast::<u64>();
    // SAFETY: `S` is `u64`, so `at` points at a `u64` in an `UnsafeCell`,
    // aligned as `AtomicU64` is (checked above), and valid while `cell`
    // is borrowed. Every access that may overlap with this one is atomic:
    // plain accesses need the shard's writer, which waits for every
    // reader (see the module's docs).
    #[allow(unsafe_code)]
    Some(unsafe { AtomicU64::from_ptr(at) })
}

/// `bits` as a state of one word, if `S` is `u64`.
#[inline(always)]
pub(super) fn as_state<S: 'static>(bits: &mut u64) -> Option<&mut S> {
    (bits as &mut dyn Any).downcast_mut::<S>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn only_u64_states_are_words() {
        assert!(is_word::<u64>());
        assert!(!is_word::<[u64; 2]>());
        assert!(!is_word::<i64>());
        let cell = StateCell::new(7u64);
        let w = word(&cell).unwrap();
        assert_eq!(w.load(Ordering::Relaxed), 7);
        assert!(w
            .compare_exchange(7, 9, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok());
        assert_eq!(*cell.read(), 9);
        assert!(word(&StateCell::new(7i64)).is_none());
        let mut bits = 3u64;
        *as_state::<u64>(&mut bits).unwrap() += 1;
        assert_eq!(bits, 4);
        assert!(as_state::<i64>(&mut bits).is_none());
    }
}
