//! A [`MemoryStore`]'s refunds and settlements.

use super::store::MemoryStore;
use crate::algorithm::StableKey;
use crate::{Algorithm, Decision, StoreError};
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    /// Gives back `cost` that `key` was admitted at `admitted_at`, for
    /// policies that count only some outcomes (see
    /// [`Algorithm::refund`]), at once: what [`Store::refund`] does.
    pub(super) fn refund_key<Q>(&self, key: &Q, cost: u64, admitted_at: u64, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, now, _) = cell.enter(at, now);
        self.keep_unambiguous(&mut shard, now);
        if let Some(state) = shard.refund_state(hash, |(k, _)| k.borrow() == key) {
            self.algorithm
                .refund(state, cost, admitted_at.min(now), now);
            cell.forget(hash);
        }
    }

    /// Settles a request of `key` admitted at `admitted_at` with `reserved`
    /// cost to its `actual` cost at `now`, atomically (under the key's
    /// shard lock): up by charging `actual - reserved` unconditionally
    /// (the key may go into debt, [`Algorithm::charge`]), down by giving
    /// back `reserved - actual` as [`refund_key`](Self::refund_key)
    /// does: what [`Store::settle`] answers, at once, what a peek at `now`
    /// tells after it (`allowed` false: in debt).
    ///
    /// The key's remembered denial is forgotten, so its next check is
    /// decided on the settled state (a key in debt is denied with the
    /// debt's wait, and remembered again). A ban stands as it was. A key
    /// the store does not hold settles from the state its next check would
    /// start from (full, or what the sketch of evicted keys says); a key
    /// left in debt is inserted, so this fails as a check does when the
    /// cap is reached with [`AtCapacity::Refuse`].
    pub(super) fn settle_key<Q>(
        &self,
        key: &Q,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError>
    where
        K: Borrow<Q> + StableKey,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, now, _) = cell.enter(at, now);
        self.keep_unambiguous(&mut shard, now);
        let at = admitted_at.min(now);
        let decision = match shard.refund_state(hash, |(k, _)| k.borrow() == key) {
            Some(state) => self.settle_state(state, reserved, actual, at, now),
            None => {
                let mut state = match shard.evicted_use(hash, now) {
                    0 => self.algorithm.fresh(key, now),
                    used => self.algorithm.restore(key, used, now),
                };
                let decision = self.settle_state(&mut state, reserved, actual, at, now);
                if !self.algorithm.is_full(&state, now) {
                    self.insert(cell, &mut shard, hash, key.to_owned(), state, now)?;
                }
                decision
            }
        };
        cell.forget(hash);
        Ok(decision)
    }

    /// One state's settlement (see [`settle_key`](Self::settle_key)).
    fn settle_state(
        &self,
        state: &mut A::State,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Decision {
        if actual > reserved {
            return self.algorithm.charge(state, actual - reserved, now);
        }
        if actual < reserved {
            self.algorithm
                .refund(state, reserved - actual, admitted_at, now);
        }
        // A charge of 0: a peek that tells a debt still owed.
        self.algorithm.charge(state, 0, now)
    }
}
