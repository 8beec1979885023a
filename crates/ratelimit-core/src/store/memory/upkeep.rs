//! A [`MemoryStore`]'s upkeep: sweeps that drop full keys and give memory
//! back, and what it holds.

use super::store::MemoryStore;
use crate::store::shard::StoreCounts;
use crate::store::Upkeep;
use crate::Algorithm;
use std::hash::{BuildHasher, Hash};

/// Buckets each shard sweeps per [`Upkeep::maintain`] call.
const MAINTAIN_STEP: usize = 16 * 1024;

impl<A: Algorithm, K> MemoryStore<A, K> {
    /// The keys held, and what eviction at the cap has done so far, summed
    /// over the shards (each shard's lock is taken in turn): keys evicted
    /// while they held quota, new keys that started from evicted keys'
    /// use, and those of them refused at once. [`clear`](Self::clear)
    /// zeroes them. (What [`Upkeep::counts`] answers.)
    fn sum_counts(&self) -> StoreCounts {
        let mut sum = StoreCounts::default();
        for (cell, at) in self.cells() {
            let shard = cell.write(at);
            sum += StoreCounts {
                keys: shard.len() as u64,
                ..shard.counts
            };
        }
        sum
    }
}

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    /// Drops every key whose state is full at `now`, every ban whose
    /// offences are forgotten by then and what the sketch of evicted keys
    /// holds of keys all full by then, and gives unused memory back.
    /// Returns the number of keys left.
    ///
    /// This is a whole pass over every shard (each shard's lock is held
    /// for its own pass); [`Upkeep::maintain`] does the same in
    /// bounded steps.
    pub fn sweep(&self, now: u64) -> usize {
        let mut left = 0;
        for (cell, at) in self.cells() {
            let (mut shard, now, _) = cell.enter(at, now);
            shard.drop_full(&self.algorithm, now);
            shard.sweep_bans(now, usize::MAX);
            let hasher = &self.hasher;
            shard.shrink_to_fit(now, |k| hasher.hash_one(k));
            cell.placed(&shard);
            left += shard.len();
        }
        left
    }

    /// One bounded step of upkeep at `now`: every shard sweeps up to 16,384
    /// buckets for full keys, going round its table over successive calls,
    /// and shrinks when less than a quarter full; it sweeps as many of its
    /// bans for those whose offences are forgotten, and frees what its
    /// sketch of evicted keys holds of keys all full by `now`. Each
    /// shard's lock is held for its own step only. Returns the keys
    /// dropped.
    ///
    /// Calling it every second gives back the memory of a flood of keys
    /// within a few seconds of their states being full, even while no
    /// request arrives. (What [`Upkeep::maintain`] does.)
    fn maintain_step(&self, now: u64) -> usize {
        let mut dropped = 0;
        for (cell, at) in self.cells() {
            let (mut shard, now, _) = cell.enter(at, now);
            self.keep_unambiguous(&mut shard, now);
            let hasher = &self.hasher;
            dropped +=
                shard.sweep_step(&self.algorithm, now, MAINTAIN_STEP, |k| hasher.hash_one(k));
            cell.placed(&shard);
            shard.sweep_bans(now, MAINTAIN_STEP);
        }
        dropped
    }
}

impl<A: Algorithm, K: Hash + Eq> Upkeep for MemoryStore<A, K> {
    fn maintain(&self, now: u64) -> usize {
        self.maintain_step(now)
    }

    fn counts(&self) -> Option<StoreCounts> {
        Some(self.sum_counts())
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        vec![self.algorithm.name()]
    }
}
