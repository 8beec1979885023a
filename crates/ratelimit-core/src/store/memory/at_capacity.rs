//! [`AtCapacity`]: what a [`MemoryStore`](crate::MemoryStore) at its cap
//! does with a new key.

#[cfg(doc)]
use crate::StoreError;

/// What a [`MemoryStore`](crate::MemoryStore) at its cap does with a new
/// key when none of the sampled keys is full.
///
/// ```
/// use ratelimit_core::store::AtCapacity;
/// use ratelimit_core::{Gcra, MemoryStore, Store, StoreError};
/// use std::time::Duration;
///
/// let store = MemoryStore::builder(Gcra::new(1, Duration::from_secs(1)).unwrap())
///     .max_keys(Some(1))
///     .at_capacity(AtCapacity::Refuse)
///     .build().unwrap();
/// assert!(store.check(&1, 1, 0).value().unwrap().allowed);
/// let full = store.check(&2, 1, 0).value();
/// assert!(matches!(full, Err(StoreError::CapacityExceeded { max_keys: 1 })));
/// # let _: &MemoryStore<Gcra, u64> = &store;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AtCapacity {
    /// Evict the sampled key nearest to full (the default): new clients
    /// are still limited.
    #[default]
    Evict,
    /// Fail the check with [`StoreError::CapacityExceeded`]: the new key
    /// is refused (tower-ratelimit's layer answers 503 whatever its
    /// failure policy).
    Refuse,
}
