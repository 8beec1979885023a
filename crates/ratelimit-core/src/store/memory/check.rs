//! A [`MemoryStore`]'s checks: from the deny slots, by reading the shard,
//! or under its lock (with bans), and a new key's first check.

use super::store::MemoryStore;
use crate::algorithm::StableKey;
use crate::store::guess;
use crate::store::shard::{At, Shard, ShardCell};
use crate::store::NeverPending;
use crate::{Algorithm, Answer, Decision, StoreError};

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

/// What a memory store's check answers: always at once.
pub(super) type Checked =
    Answer<Result<Decision, StoreError>, NeverPending<Result<Decision, StoreError>>>;

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    /// Decides a request of `cost` for `key` at `now` (nanoseconds of the
    /// caller's clock). Only admitted cost changes the key's state.
    ///
    /// Time never goes back within a shard: a `now` older than the latest
    /// the shard has decided at (a caller preempted between reading its
    /// clock and this call) is decided at that latest time.
    ///
    /// Fails only when a cap on keys is set with [`AtCapacity::Refuse`]
    /// and reached (see the type's docs).
    ///
    /// What [`Store::check`] answers, at once. Each path builds the answer
    /// where the caller takes it: moved out of a local, the decision would
    /// be copied, and read back wider than it was written.
    #[inline(always)]
    pub(super) fn check_key<Q>(&self, key: &Q, cost: u64, now: u64) -> Checked
    where
        K: Borrow<Q> + StableKey,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        if cost == 1 && self.deny_cache {
            if let Some(denied) = cell.remembered(hash, now, self.constants) {
                return Answer::ready(Ok(denied));
            }
        }
        cell.prefetch(hash);
        if self.read_denials && !guess::likely_admitted() {
            if let Some(denied) = self.check_read(cell, at, hash, key, cost, now) {
                return Answer::ready(Ok(denied));
            }
        }
        let (mut shard, now, contended) = cell.enter(at, now);
        self.keep_unambiguous(&mut shard, now);
        let promote = contended || self.promote_always;
        if self.ban.is_none() && shard.bans.is_none() {
            // The common path: no bans, a key the store holds.
            match shard.check_state(hash, |(k, _)| k.borrow() == key, promote, cell.place()) {
                Some(state) => {
                    let decision = self.algorithm.check(state, cost, now);
                    self.decided(cell, &mut shard, hash, cost, now, &decision);
                    // Unlocked before the decision is moved out: the compiler
                    // then builds it in place, and the lock is held shorter.
                    drop(shard);
                    return Answer::ready(Ok(decision));
                }
                // Probed once: a new key goes straight to its insert.
                None => {
                    return Answer::ready(self.check_unheld(cell, &mut shard, hash, key, cost, now))
                }
            }
        }
        Answer::ready(self.check_locked(cell, &mut shard, hash, key, cost, now, promote))
    }

    /// A check that reads the shard without writing it (see the type's
    /// docs): the denial of a key the store holds, or `None`, and the
    /// check takes the locked path.
    #[inline(always)]
    fn check_read<Q>(
        &self,
        cell: &ShardCell<K, A::State>,
        at: At<'_>,
        hash: u64,
        key: &Q,
        cost: u64,
        now: u64,
    ) -> Option<Decision>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let shard = cell.read(at)?;
        let now = now.max(cell.latest());
        if shard.bans.is_some() || now.saturating_sub(shard.last_sweep) >= self.half_horizon {
            return None;
        }
        let state = shard.peek_state(hash, |(k, _)| k.borrow() == key)?;
        let denied = self.algorithm.check_denied(state, cost, now)?;
        drop(shard);
        if cost == 1 && self.deny_cache && guess::denied_again(hash) {
            // A hot key: the locked path remembers its denial in the deny
            // slots, from which its next checks are answered.
            return None;
        }
        Some(denied)
    }

    /// [`check_key`](Self::check_key) of a key the store does not hold,
    /// with no bans in the store: out of line, as a new key is the rare
    /// case of the check path.
    #[inline(never)]
    fn check_unheld<Q>(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: &Q,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError>
    where
        K: Borrow<Q> + StableKey,
        Q: StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let (decision, _) = self.check_new(cell, shard, hash, key, cost, now)?;
        self.decided(cell, shard, hash, cost, now, &decision);
        Ok(decision)
    }

    /// [`check_key`](Self::check_key) under the shard's lock, when the
    /// store has a ban policy or the shard holds bans.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn check_locked<Q>(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: &Q,
        cost: u64,
        now: u64,
        promote: bool,
    ) -> Result<Decision, StoreError>
    where
        K: Borrow<Q> + StableKey,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(left) = shard.bans.as_deref().and_then(|b| b.active(hash, now)) {
            if cost > 0 {
                let d = self.ban_decision(left);
                self.decided(cell, shard, hash, cost, now, &d);
                return Ok(d);
            }
        }
        let found = shard.check_state(hash, |(k, _)| k.borrow() == key, promote, cell.place());
        let (decision, estimated) = match found {
            Some(state) => (self.algorithm.check(state, cost, now), false),
            None => self.check_new(cell, shard, hash, key, cost, now)?,
        };
        let decision = match &self.ban {
            // `estimated`: a new key started from the sketch of evicted
            // keys. Denied with nothing left; not a request that can never fit,
            // nor a new key refused on the sketch's estimate (under a key
            // flood that may be anyone; refused, it is admitted nothing).
            Some(policy)
                if !estimated
                    && !decision.allowed
                    && decision.remaining == 0
                    && decision.wait.is_some() =>
            {
                let left = shard.bans_mut(self.shard_cap).offend(hash, now, policy);
                self.ban_decision(left)
            }
            _ => decision,
        };
        self.decided(cell, shard, hash, cost, now, &decision);
        Ok(decision)
    }

    /// After a check's `decision`, on every check path: the thread's next
    /// prefetch learns whether it was admitted at a cost (see
    /// [`guess::admitted`]), and a cost-1 denial of the key the shard's
    /// previous denial was of is remembered in the deny slots.
    #[inline(always)]
    fn decided(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        cost: u64,
        now: u64,
        decision: &Decision,
    ) {
        if cost == 1 && !decision.allowed && self.deny_cache && shard.denied_again(hash) {
            cell.remember(hash, now, decision.wait, decision.reset, decision.banned);
        }
        guess::admitted(decision.allowed && cost > 0);
    }

    /// Decides the first check of a key the store does not hold: from a
    /// fresh state, or from what evicted keys had used if the sketch
    /// covers it. Only a key that was admitted is inserted: a refused new
    /// key changed nothing, so it takes no room (and evicts no one); its
    /// next check reads the sketch again. Also returns whether the key
    /// started from the sketch's estimate.
    fn check_new<Q>(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: &Q,
        cost: u64,
        now: u64,
    ) -> Result<(Decision, bool), StoreError>
    where
        K: Borrow<Q> + StableKey,
        Q: StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let used = shard.evicted_use(hash, now);
        let mut state = match used {
            0 => self.algorithm.fresh(key, now),
            used => self.algorithm.restore(key, used, now),
        };
        let decision = self.algorithm.check(&mut state, cost, now);
        if used > 0 {
            shard.counts.restored += 1;
            shard.counts.refused += u64::from(!decision.allowed);
        }
        if decision.allowed && !self.algorithm.is_full(&state, now) {
            self.insert(cell, shard, hash, key.to_owned(), state, now)?;
        }
        Ok((decision, used > 0))
    }

    /// The denial of a banned key with `left` ns of its ban to run.
    fn ban_decision(&self, left: u64) -> Decision {
        let c = self.constants;
        Decision::ban(c.limit, c.window, Duration::from_nanos(left))
    }
}
