//! [`Upkeep`]: what a store's owner calls whatever the key.

use super::StoreCounts;

/// A store's upkeep and counts, which depend on no key: the supertrait of
/// [`Store`](crate::Store), whatever its key types (a
/// [`MemoryStore`](crate::MemoryStore) of `String` keys is a store of
/// `String` and of `str`). A store that keeps nothing in this process
/// implements it with the defaults: `impl Upkeep for MyStore {}`.
///
/// ```
/// use ratelimit_core::{store::Upkeep, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// store.check("alice", 1, 0).value().unwrap();
/// assert_eq!(store.counts().unwrap().keys, 1);
/// // A second later the key is full again, and upkeep drops it.
/// assert_eq!(store.maintain(1_000_000_000), 1);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
pub trait Upkeep {
    /// Bounded upkeep at `now`, called every second or so by whoever owns
    /// the store (the HTTP layer does, on tokio): a memory store drops
    /// keys that are back to full and gives memory back. Returns the keys
    /// dropped. The default does nothing.
    fn maintain(&self, now: u64) -> usize {
        let _ = now;
        0
    }

    /// How many keys the store holds here and what eviction at its cap
    /// did, for upkeep to report; `None` (the default) for a store that
    /// keeps no keys in this process.
    fn counts(&self) -> Option<StoreCounts> {
        None
    }

    /// The names of the algorithms deciding the store's limits
    /// ([`Algorithm::name`](crate::Algorithm::name): `gcra`,
    /// `leaky-bucket`...), one per limit, for an owner to check its
    /// settings against at build (a shaping layer needs a leaky bucket).
    /// Empty (the default) when the store does not say.
    fn algorithm_names(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// A shared store's upkeep is the store's.
impl<S: Upkeep + ?Sized> Upkeep for std::sync::Arc<S> {
    fn maintain(&self, now: u64) -> usize {
        (**self).maintain(now)
    }

    fn counts(&self) -> Option<StoreCounts> {
        (**self).counts()
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        (**self).algorithm_names()
    }
}
