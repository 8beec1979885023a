//! The `_sync` names `MemoryStore`'s at-once methods had before they were
//! spelled `_now` like [`Store::check_now`](crate::Store::check_now);
//! deprecated, each calls its `_now` method.

use crate::algorithm::StableKey;
use crate::MemoryStore;
use crate::{Algorithm, Decision, StoreError};
use std::borrow::Borrow;
use std::hash::Hash;
use std::time::Duration;

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    /// [`check_now`](Self::check_now).
    #[deprecated(note = "renamed `check_now`")]
    pub fn check_sync<Q>(&self, key: &Q, cost: u64, now: u64) -> Result<Decision, StoreError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        self.check_now(key, cost, now)
    }

    /// [`settle_now`](Self::settle_now).
    #[deprecated(note = "renamed `settle_now`")]
    pub fn settle_sync<Q>(
        &self,
        key: &Q,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        self.settle_now(key, reserved, actual, admitted_at, now)
    }

    /// [`ban_now`](Self::ban_now).
    #[deprecated(note = "renamed `ban_now`")]
    pub fn ban_sync<Q>(&self, key: &Q, duration: Duration, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ban_now(key, duration, now);
    }

    /// [`unban_now`](Self::unban_now).
    #[deprecated(note = "renamed `unban_now`")]
    pub fn unban_sync<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.unban_now(key);
    }

    /// [`reset_now`](Self::reset_now).
    #[deprecated(note = "renamed `reset_now`")]
    pub fn reset_sync<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.reset_now(key)
    }
}
