//! A per-thread memo of the last few values rendered for a key, for the
//! values that repeat from one response to the next (a client far below
//! its limit gets the same `RateLimit` value on every response, a limited
//! one the same 429 for a whole second).
//!
//! A response whose values repeat costs no formatting and no allocation;
//! one whose values never repeat (`ours-draining` in
//! `benches/http/instructions.sh`) pays for the lookup (BENCHMARKS.md,
//! "Response memos"). Keys are values, never addresses: a limit is told by an id
//! drawn once per limit when its layer is built, and never reused, or by
//! its name.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::LocalKey;

/// A fresh limit id (never 0).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The last `N` values kept, the next slot to replace, and the last key
/// missed: a value is kept only when its key is missed twice in a row, so
/// values that never repeat (a busy client's `r`) cost no copies.
pub(crate) struct Memo<K, V, const N: usize> {
    entries: [Option<(K, V)>; N],
    next: usize,
    missed: Option<K>,
}

impl<K: Copy + Eq, V: Clone, const N: usize> Memo<K, V, N> {
    pub(crate) const fn new() -> Self {
        Self {
            entries: [const { None }; N],
            next: 0,
            missed: None,
        }
    }

    /// The value for `key`, from the memo of this thread or made by
    /// `make`.
    #[inline]
    pub(crate) fn get(
        memo: &'static LocalKey<RefCell<Self>>,
        key: K,
        make: impl FnOnce() -> Option<V>,
    ) -> Option<V> {
        let hit = memo.with(|m| m.borrow().find(&key));
        if hit.is_some() {
            return hit;
        }
        let value = make()?;
        memo.with(|m| m.borrow_mut().miss(key, &value));
        Some(value)
    }

    /// The value for `key`, from the memo of this thread, or made by `make`
    /// and kept at once (in place of the oldest): for values that are dear
    /// to make and few.
    pub(crate) fn keep(
        memo: &'static LocalKey<RefCell<Self>>,
        key: K,
        make: impl FnOnce() -> V,
    ) -> V {
        if let Some(hit) = memo.with(|m| m.borrow().find(&key)) {
            return hit;
        }
        let value = make();
        memo.with(|m| m.borrow_mut().put(key, value.clone()));
        value
    }

    #[inline]
    fn find(&self, key: &K) -> Option<V> {
        self.entries
            .iter()
            .flatten()
            .find(|e| e.0 == *key)
            .map(|e| e.1.clone())
    }

    #[cold]
    fn miss(&mut self, key: K, value: &V) {
        if self.missed == Some(key) {
            self.put(key, value.clone());
        } else {
            self.missed = Some(key);
        }
    }

    fn put(&mut self, key: K, value: V) {
        self.entries[self.next] = Some((key, value));
        self.next = (self.next + 1) % N;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static MEMO: RefCell<Memo<u64, String, 2>> = const { RefCell::new(Memo::new()) };
    }

    #[test]
    fn kept_after_two_misses_in_a_row() {
        let made = std::cell::Cell::new(0);
        let get = |k: u64| {
            Memo::get(&MEMO, k, || {
                made.set(made.get() + 1);
                Some(k.to_string())
            })
        };
        assert_eq!(get(1).as_deref(), Some("1"));
        assert_eq!(get(1).as_deref(), Some("1"));
        assert_eq!(made.get(), 2);
        assert_eq!(get(1).as_deref(), Some("1"));
        assert_eq!(made.get(), 2, "kept");
        get(2);
        get(3);
        get(2);
        assert_eq!(made.get(), 5, "2 and 3 alternate: never twice in a row");
        assert!(Memo::get(&MEMO, 9, || None).is_none());
    }

    #[test]
    fn kept_at_once_by_keep() {
        let made = std::cell::Cell::new(0);
        let keep = |k: u64| {
            Memo::keep(&MEMO, k, || {
                made.set(made.get() + 1);
                k.to_string()
            })
        };
        assert_eq!(keep(7), "7");
        assert_eq!(keep(8), "8");
        assert_eq!(keep(7), "7");
        assert_eq!(keep(8), "8");
        assert_eq!(made.get(), 2, "each made once");
    }
}
