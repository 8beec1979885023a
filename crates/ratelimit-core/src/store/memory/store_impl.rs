//! `impl Store for MemoryStore`: every operation answered at once.

use super::store::MemoryStore;
use crate::algorithm::StableKey;
#[cfg(doc)]
use crate::store::AtCapacity;
use crate::store::{BanLeftFuture, NeverPending, SettleFuture, Store};
use crate::Answer;
use crate::{Algorithm, Decision, StoreError};
use std::borrow::Borrow;
use std::hash::Hash;
use std::time::Duration;

/// A memory store answers every operation at once. Its keys may be
/// borrowed: a store of `String` keys is checked with a `&str`.
impl<A, K, Q> Store<Q> for MemoryStore<A, K>
where
    A: Algorithm,
    K: Borrow<Q> + Hash + Eq + StableKey + Clone + Send + Sync + 'static,
    Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
{
    type CheckFuture = NeverPending<Result<Decision, StoreError>>;
    type WriteFuture = NeverPending<Result<(), StoreError>>;

    /// Decides a request of `cost` for `key` at `now` (nanoseconds of the
    /// caller's clock). Only admitted cost changes the key's state.
    ///
    /// Time never goes back within a shard: a `now` older than the latest
    /// the shard has decided at (a caller preempted between reading its
    /// clock and this call) is decided at that latest time.
    ///
    /// Fails only when a cap on keys is set with [`AtCapacity::Refuse`]
    /// and reached (see the type's docs).
    #[inline(always)]
    fn check(
        &self,
        key: &Q,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        self.check_key(key, cost, now)
    }

    #[inline]
    fn refund(
        &self,
        key: &Q,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.refund_key(key, cost, admitted_at, now);
        Answer::ready(Ok(()))
    }

    fn settle(
        &self,
        key: &Q,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, SettleFuture> {
        Answer::ready(self.settle_key(key, reserved, actual, admitted_at, now))
    }

    fn reset(&self, key: &Q) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.reset_key(key);
        Answer::ready(Ok(()))
    }

    fn ban(
        &self,
        key: &Q,
        duration: Duration,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.ban_key(key, duration, now);
        Answer::ready(Ok(()))
    }

    fn unban(&self, key: &Q) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.unban_key(key);
        Answer::ready(Ok(()))
    }

    fn ban_left(
        &self,
        key: &Q,
        now: u64,
    ) -> Answer<Result<Option<Duration>, StoreError>, BanLeftFuture> {
        Answer::ready(Ok(self.ban_left_key(key, now)))
    }
}
