//! [`MemoryStore`]: its shards, how a key finds its shard, and an insert.

use super::at_capacity::AtCapacity;
use crate::algorithm::StableKey;
use crate::store::ban::BanPolicy;
use crate::store::deny_cache::Constants;
use crate::store::shard::{At, Shard, ShardCell, INSERT_STEP};
use crate::store::shard_lock::Readers;
#[cfg(doc)]
use crate::store::Upkeep;
use crate::{Algorithm, StoreError};
use hashbrown::DefaultHashBuilder;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// A concurrent keyed store: every key has its own state, created full on
/// first use, and every check of a key is atomic.
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(1)).unwrap());
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// assert!(!store.check("alice", 1, 0).value().unwrap().allowed);
/// assert!(store.check("bob", 1, 0).value().unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
///
/// # Layout and cost
///
/// Keys are spread over shards (a power of two, by default 16 per CPU,
/// 32 to 1,024, fewer under a small cap on keys; see
/// [`MemoryStoreBuilder::shards`](crate::store::MemoryStoreBuilder::shards)),
/// each a lock around a [`hashbrown::HashTable`] of `(key, state)` pairs, hashed once per check with a randomly seeded
/// hasher (foldhash), so clients cannot choose colliding keys. A check is
/// one hash, one uncontended lock and a few integer operations; nothing on
/// it is proportional to the number of keys.
///
/// A check whose thread's latest check was denied guesses that it will be
/// denied too, and first reads its shard without writing anything that
/// other threads write: it counts itself in its thread's stripe of the
/// store's reader counts (a cache line that threads on other cores do not
/// write) and reads the key's state. An algorithm that tells a denial
/// without writing its state ([`Algorithm::check_denied`]: GCRA and the
/// token bucket, alone or in an [`AnyAlgorithm`](crate::AnyAlgorithm)) answers
/// it there, so denials of keys among many, on every core at once, move
/// no cache line between cores. The answer is the one the locked path
/// would give at that instant, field for field; it is decided at the
/// later of the caller's time and the shard's latest, and moves neither,
/// as it changes no state. A check that would be admitted, a key the
/// store does not hold, a shard with bans or due for a sweep, and a shard
/// a writer holds take the locked path; a writer waits for the shard's
/// readers to finish (one lookup and one decision each). A store with a
/// ban policy, and a shard while it holds a ban (until the ban is lifted,
/// or ends and [`maintain`](Upkeep::maintain) or [`sweep`](Self::sweep)
/// passes it), decide every check under the lock.
///
/// A cost-1 check that is denied again (the shard's previous denial was of
/// the same key: a hot key) is remembered in a small per-shard slot
/// array (16 slots, by hash; a denial keeps its slot against other keys'
/// for a millisecond) until the instant it would be admitted: no
/// state can change before then except by a refund or an eviction, which
/// forget it. Further cost-1 checks of that key are answered from the slot
/// without taking the lock, so a flood from one client on every core only
/// reads shared memory. The answer is the one the locked path would give,
/// field for field. (Two keys are told apart in a slot by their 64-bit
/// seeded hash; a denied key could answer for another only if the two
/// collide in all 64 bits.) A denial of a key among many is not
/// remembered: it would write a slot that other threads read, for an
/// answer its key is unlikely to ask for before the slot is taken.
///
/// A key that several cores check at once (its checks find the shard's
/// lock held by another thread twice in a row) keeps its state beside the
/// lock, on the lock's cache line, while its bucket keeps the key,
/// read-only: each admitted check then moves one cache line between
/// cores, not two. This applies to states of up to 8 bytes (GCRA and the
/// buckets); the state goes back to its bucket when another key takes its
/// place and before any other change to the table (an insert, a sweep, an
/// eviction), so nothing else sees the difference.
///
/// Memory per key is the key, the state and one control byte, over the
/// table's load factor (between 7/16 and 7/8). States:
///
/// | algorithm | state bytes |
/// |---|---|
/// | gcra, token-bucket, leaky-bucket | 8 (16 for the wide state, `Gcra<u128>` and the like) |
/// | fixed-window | 16 |
/// | sliding-window | 24 |
/// | sliding-log | 40 + 16 per logged instant, up to `limit` entries |
/// | [`AnyAlgorithm`](crate::AnyAlgorithm) | 40 (+ the log) |
///
/// With `u64` keys and GCRA that is 16 bytes a slot; the bytes a key
/// takes at one million keys, beside `governor`'s keyed limiter, are in
/// [BENCHMARKS.md](https://github.com/ratelimit-rs/ratelimit/blob/main/BENCHMARKS.md)
/// ("Memory per key at 1,000,000 keys").
///
/// # Bounded memory
///
/// A key whose state is back to full carries no information, so it is
/// dropped without changing any decision:
/// - every insert of a new key first sweeps a few buckets of its shard (a
///   cursor goes round the table), so full keys go before the table grows;
/// - [`maintain`](Upkeep::maintain) sweeps a bounded number of buckets of
///   every shard; call it every second or so (the HTTP layer of
///   `tower-ratelimit` does, on tokio) to give memory back while no new
///   keys arrive;
/// - at the end of each pass a table less than a quarter full shrinks;
/// - [`sweep`](Self::sweep) does a whole pass at once and gives all unused
///   memory back;
/// - on a schedule the algorithm sets ([`Algorithm::idle_horizon`]): GCRA
///   and the buckets keep their scaled time modulo 2^64 in 8 bytes (2^128
///   in 16 for the wide state), which stays unambiguous as long as each
///   shard is swept at least that often (decades for usual settings; 38
///   minutes at a million requests a second). A shard checks this on every
///   access, so no background task is needed.
///
/// # At the cap
///
/// A cap
/// ([`MemoryStoreBuilder::max_keys`](crate::store::MemoryStoreBuilder::max_keys):
/// 1,000,000 keys by default, `None` for none)
/// bounds the number of keys with state, split evenly over the shards. A new key that finds its
/// shard full first takes the place of a full key, if one of a few sampled
/// ones is full (that loses nothing). Otherwise, with
/// [`AtCapacity::Evict`] (the default), the sampled key nearest to full
/// (the least time until its state is full) is evicted, and what it had
/// used lives on in a small sketch of evicted keys: if it comes back
/// before its state would have been full, it starts at least as used as
/// it left, so eviction gives back nothing, however often it happens and
/// however many keys flood the store (the bound is 0 requests a period).
/// The sketch is two rows of cells, one cell a row per key, picked by its
/// seeded hash; a cell holds the largest use written into it, until every
/// key written into it would be full again. In front of it, a set of the
/// keys evicted lately (16-bit fingerprints, in generations freed as
/// their keys would be full) tells a key never evicted, which starts
/// fresh; a key the set holds starts as used as the lesser of its two
/// cells. The set grows with a flood's evictions up to about 80 evicted
/// keys per capped key within a period; past that, every new key reads
/// its cells until the overflow's keys would be full, and a newcomer may
/// start partly used, or denied. Limits err toward denying, never toward
/// admitting (ALGORITHMS.md, "Eviction at a store's cap", has the
/// measured cost). The cells take 32 bytes per capped key and the set at
/// most 256, allocated per shard from its first eviction on; the set
/// gives its generations back as they age. Sampling picks the key whose
/// sketch entry ends soonest, and keeps the work per insert bounded: new
/// clients are limited as usual while a flood of new keys churns the
/// table. With
/// [`AtCapacity::Refuse`], the check of the new key fails with
/// [`StoreError::CapacityExceeded`] instead and the caller's failure
/// policy decides. Known keys are limited exactly either way.
pub struct MemoryStore<A: Algorithm, K> {
    pub(super) algorithm: A,
    pub(super) shards: Box<[ShardCell<K, A::State>]>,
    pub(super) hasher: DefaultHashBuilder,
    pub(super) shard_shift: u32,
    pub(super) shard_cap: usize,
    pub(super) max_keys: Option<usize>,
    pub(super) at_capacity: AtCapacity,
    pub(super) deny_cache: bool,
    pub(super) promote_always: bool,
    pub(super) constants: Constants,
    pub(super) half_horizon: u64,
    /// Cells per row of each shard's sketch of evicted keys.
    pub(super) evicted_width: usize,
    /// What a denial costs a key, if anything (boxed: rarely set).
    pub(super) ban: Option<Box<BanPolicy>>,
    /// Whether a check guessed to be denied first reads its shard without
    /// writing it (the algorithm can tell a denial so, and no ban policy
    /// needs to see it).
    pub(super) read_denials: bool,
    /// Which threads read which shard.
    pub(super) readers: Readers,
}

impl<A: Algorithm, K> MemoryStore<A, K> {
    /// The algorithm.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The configured cap on keys, if any.
    pub fn max_keys(&self) -> Option<usize> {
        self.max_keys
    }

    /// The number of keys with state.
    pub fn len(&self) -> usize {
        self.cells().map(|(cell, at)| cell.write(at).len()).sum()
    }

    /// Every shard, with where its readers are counted.
    pub(super) fn cells(&self) -> impl Iterator<Item = (&ShardCell<K, A::State>, At<'_>)> {
        let readers = &self.readers;
        self.shards
            .iter()
            .enumerate()
            .map(move |(i, cell)| (cell, (readers, i)))
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key.
    pub fn clear(&self) {
        for (cell, at) in self.cells() {
            let mut shard = cell.write(at);
            shard.clear();
            cell.placed(&shard);
            cell.forget_all();
        }
    }
}

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    #[inline]
    pub(super) fn cell(&self, hash: u64) -> (&ShardCell<K, A::State>, At<'_>) {
        // The bits just below the top 7 (those feed hashbrown's tags).
        let index = (hash >> self.shard_shift) as usize & (self.shards.len() - 1);
        (&self.shards[index], (&self.readers, index))
    }

    /// Whether `key` has state (a key never seen, reset, or dropped once
    /// full has none).
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let shard = cell.write(at);
        shard.peek_state(hash, |(k, _)| k.borrow() == key).is_some()
    }

    pub(super) fn insert(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: K,
        state: A::State,
        now: u64,
    ) -> Result<(), StoreError>
    where
        K: StableKey,
    {
        let hasher = &self.hasher;
        shard.sweep_step(&self.algorithm, now, INSERT_STEP, |k| hasher.hash_one(k));
        if shard.len() >= self.shard_cap {
            let evict = self.at_capacity == AtCapacity::Evict;
            let width = self.evicted_width;
            let rehash = |k: &K| hasher.hash_one(k);
            match shard.make_room(&self.algorithm, now, hash, evict, width, rehash) {
                Some(gone) => cell.forget(gone),
                None => {
                    // The sweep may have shrunk the table.
                    cell.placed(shard);
                    return Err(StoreError::CapacityExceeded {
                        max_keys: self.max_keys.unwrap_or(usize::MAX),
                    });
                }
            }
        }
        // What the store keeps of the key: its bounded form.
        shard.insert(hash, key.into_stored(), state, |k| hasher.hash_one(k));
        cell.placed(shard);
        Ok(())
    }

    /// Sweeps a shard often enough for wrapped scaled times to stay
    /// unambiguous: every state still held was written less than
    /// `horizon` ago, and is at most `horizon / 2` ahead of its write.
    #[inline]
    pub(super) fn keep_unambiguous(&self, shard: &mut Shard<K, A::State>, now: u64) {
        let elapsed = now.saturating_sub(shard.last_sweep);
        if elapsed >= self.half_horizon {
            shard.drop_full(&self.algorithm, now);
        }
    }
}

impl<A: Algorithm + std::fmt::Debug, K> std::fmt::Debug for MemoryStore<A, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("algorithm", &self.algorithm)
            .field("shards", &self.shards.len())
            .field("max_keys", &self.max_keys)
            .field("at_capacity", &self.at_capacity)
            .finish_non_exhaustive()
    }
}
