//! A [`MemoryStore`]'s bans, unbans and resets of one key.

use super::store::MemoryStore;
use crate::Algorithm;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    /// Bans `key` for `duration` from `now` (see [`Store::ban`]), whether
    /// or not the store bans on denials; replaces a ban already standing.
    pub(super) fn ban_key<Q>(&self, key: &Q, duration: Duration, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, now, _) = cell.enter(at, now);
        let until = now.saturating_add(crate::plumbing::saturating_nanos(duration));
        shard.bans_mut(self.shard_cap).set(hash, until);
        cell.forget(hash);
    }

    /// Lifts `key`'s ban and forgets its offences (what it used stays
    /// used).
    pub(super) fn unban_key<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, _, _) = cell.enter(at, 0);
        shard.lift_ban(hash);
        cell.forget(hash);
    }

    /// The time left of `key`'s ban at `now`, if it is banned.
    pub(super) fn ban_left_key<Q>(&self, key: &Q, now: u64) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (shard, now, _) = cell.enter(at, now);
        let left = shard.bans.as_deref()?.active(hash, now)?;
        Some(Duration::from_nanos(left))
    }

    /// Forgets `key`'s state: its next check starts full, as a key never
    /// seen (see [`Store::reset`]); its remembered denial goes too.
    ///
    /// The sketch of evicted keys (see the type's docs, "At the cap") is
    /// left as it is: its cells are shared with other evicted keys, and
    /// lowering one would give those keys quota back. So a key evicted at
    /// the cap, then reset while its sketch cells still stand, starts as
    /// used as those cells say (erring toward denying, as eviction does);
    /// a key that had state when reset starts full.
    pub(super) fn reset_key<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, _, _) = cell.enter(at, 0);
        shard.remove(hash, |(k, _)| k.borrow() == key);
        cell.forget(hash);
    }
}
