//! The in-memory keyed store: sharded, concurrent and bounded.

use crate::{Algorithm, Decision, StableKey, StoreError};
use hashbrown::{DefaultHashBuilder, HashTable};
use spin::mutex::{SpinMutex, SpinMutexGuard};
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// A concurrent keyed store: every key has its own state, created full on
/// first use, and every check of a key is atomic.
///
/// # Layout and cost
///
/// Keys are spread over shards (a power of two, by default four per CPU),
/// each a mutex around a [`hashbrown::HashTable`] of `(key, state)` pairs,
/// hashed once per check with a randomly seeded hasher (foldhash), so
/// clients cannot choose colliding keys. A check is one hash, one
/// uncontended lock and a few integer operations. The shard locks are spin
/// locks held only for one probe and one decision; a waiter spins briefly,
/// then yields, then sleeps.
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
/// With `u64` keys and GCRA that is 16 bytes a slot: 35.7 bytes a key
/// measured at one million keys, the same as `governor`'s keyed limiter
/// (see `BENCHMARKS.md`).
///
/// # Bounded memory
///
/// A key whose state is back to full carries no information, so it is
/// dropped without changing any decision:
/// - lazily, when a shard is about to grow, it first drops its full keys;
/// - on [`sweep`](Self::sweep), which also gives memory back;
/// - on a schedule the algorithm sets ([`Algorithm::idle_horizon`]): GCRA
///   and the buckets keep their scaled time modulo 2^64 in 8 bytes (2^128
///   in 16 for the wide state), which stays unambiguous as long as each shard is swept at least that often.
///   A shard checks this on every access, so no background task is needed.
///
/// An optional hard cap ([`MemoryStoreBuilder::max_keys`]) bounds the number
/// of keys with state. When a shard is at its share of the cap, it first
/// drops its full keys; if none can go, the check of a new key fails with
/// [`StoreError::CapacityExceeded`] and the caller's failure policy decides
/// (the HTTP layer lets the request through by default). Known keys keep
/// being limited exactly.
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(1)).unwrap());
/// assert!(store.check("alice", 1, 0).unwrap().allowed);
/// assert!(store.check("alice", 1, 0).unwrap().allowed);
/// assert!(!store.check("alice", 1, 0).unwrap().allowed);
/// assert!(store.check("bob", 1, 0).unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
pub struct MemoryStore<A: Algorithm, K> {
    algorithm: A,
    shards: Box<[ShardLock<K, A::State>]>,
    hasher: DefaultHashBuilder,
    shard_shift: u32,
    shard_cap: usize,
    max_keys: Option<usize>,
    horizon: u64,
    half_horizon: u64,
}

type ShardLock<K, S> = Padded<SpinMutex<Shard<K, S>>>;

/// Keeps each shard's lock on its own cache line.
#[repr(align(128))]
struct Padded<T>(T);

struct Shard<K, S> {
    table: HashTable<(K, S)>,
    last_sweep: u64,
    /// The latest time a check of this shard was decided at.
    latest: u64,
}

impl<K, S> Shard<K, S> {
    /// `now`, or the latest time this shard has seen if that is later.
    ///
    /// Callers read their clock before they take the lock, so a caller
    /// that was preempted in between arrives with a time older than a state
    /// another caller has already written. Algorithms need time never to
    /// go back for a key; such a check is decided at the shard's latest
    /// time instead, as if it had arrived a moment later.
    #[inline]
    fn monotonic(&mut self, now: u64) -> u64 {
        if now > self.latest {
            self.latest = now;
        }
        self.latest
    }
}

/// Builds a [`MemoryStore`] with a shard count or a cap on keys.
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder<A> {
    algorithm: A,
    shards: usize,
    max_keys: Option<usize>,
}

impl<A: Algorithm> MemoryStoreBuilder<A> {
    /// The number of shards, rounded up to a power of two (at least 1).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    /// A hard cap on the number of keys with state. `None` (the default)
    /// means no cap. The cap is split evenly over the shards.
    pub fn max_keys(mut self, max_keys: Option<usize>) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The store.
    pub fn build<K>(self) -> MemoryStore<A, K> {
        let shards = self.shards.clamp(1, 1 << 16).next_power_of_two();
        let bits = shards.trailing_zeros();
        let shard_cap = self
            .max_keys
            .map_or(usize::MAX, |m| m.div_ceil(shards).max(1));
        MemoryStore {
            half_horizon: self.algorithm.idle_horizon() / 2,
            horizon: self.algorithm.idle_horizon(),
            algorithm: self.algorithm,
            shards: (0..shards)
                .map(|_| {
                    Padded(SpinMutex::new(Shard {
                        table: HashTable::new(),
                        last_sweep: 0,
                        latest: 0,
                    }))
                })
                .collect(),
            hasher: DefaultHashBuilder::default(),
            // The top 7 bits feed hashbrown's tags; take the shard from the
            // bits below them.
            shard_shift: 57 - bits,
            shard_cap,
            max_keys: self.max_keys,
        }
    }
}

impl<A: Algorithm, K> MemoryStore<A, K> {
    /// A store for `algorithm`, with the default shard count and no cap.
    pub fn new(algorithm: A) -> Self {
        Self::builder(algorithm).build()
    }

    /// A builder, to set the shard count or a cap on keys.
    pub fn builder(algorithm: A) -> MemoryStoreBuilder<A> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        MemoryStoreBuilder {
            algorithm,
            shards: cpus * 4,
            max_keys: None,
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The number of keys with state.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.0).table.len()).sum()
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            lock(&shard.0).table = HashTable::new();
        }
    }
}

impl<A: Algorithm, K: Hash + Eq> MemoryStore<A, K> {
    #[inline]
    fn shard(&self, hash: u64) -> SpinMutexGuard<'_, Shard<K, A::State>> {
        // The bits just below the top 7 (those feed hashbrown's tags).
        let index = (hash >> self.shard_shift) as usize & (self.shards.len() - 1);
        lock(&self.shards[index].0)
    }

    /// Decides a request of `cost` for `key` at `now` (nanoseconds of the
    /// caller's clock). Only admitted cost changes the key's state.
    ///
    /// Time never goes back within a shard: a `now` older than the latest
    /// the shard has decided at (a caller preempted between reading its
    /// clock and this call) is decided at that latest time.
    ///
    /// Fails only when a cap on keys is set and reached (see the type's
    /// docs).
    #[inline]
    pub fn check<Q>(&self, key: &Q, cost: u64, now: u64) -> Result<Decision, StoreError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash);
        let now = shard.monotonic(now);
        self.keep_unambiguous(&mut shard, now);
        if let Some((_, state)) = shard.table.find_mut(hash, |(k, _)| k.borrow() == key) {
            return Ok(self.algorithm.check(state, now, cost));
        }
        let mut state = self.algorithm.fresh(key, now);
        let decision = self.algorithm.check(&mut state, now, cost);
        if !self.algorithm.is_full(&state, now) {
            self.insert(&mut shard, hash, key.to_owned(), state, now)?;
        }
        Ok(decision)
    }

    /// Gives back `cost` that `key` was admitted at `admitted_at`, for
    /// policies that count only some outcomes (see
    /// [`Algorithm::refund`]).
    pub fn refund<Q>(&self, key: &Q, cost: u64, admitted_at: u64, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash);
        let now = shard.monotonic(now);
        self.keep_unambiguous(&mut shard, now);
        if let Some((_, state)) = shard.table.find_mut(hash, |(k, _)| k.borrow() == key) {
            self.algorithm
                .refund(state, now, admitted_at.min(now), cost);
        }
    }

    /// Drops every key whose state is full at `now`, and gives unused
    /// memory back. Returns the number of keys left.
    pub fn sweep(&self, now: u64) -> usize {
        let mut left = 0;
        for shard in self.shards.iter() {
            let mut shard = lock(&shard.0);
            let now = shard.monotonic(now);
            self.drop_full(&mut shard, now);
            let hasher = &self.hasher;
            shard.table.shrink_to_fit(|(k, _)| hasher.hash_one(k));
            left += shard.table.len();
        }
        left
    }

    fn insert(
        &self,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: K,
        state: A::State,
        now: u64,
    ) -> Result<(), StoreError> {
        let table = &shard.table;
        if table.len() >= self.shard_cap || table.len() == table.capacity() {
            // About to grow or at the cap: make room from full keys first.
            self.drop_full(shard, now);
            if shard.table.len() >= self.shard_cap {
                return Err(StoreError::CapacityExceeded {
                    max_keys: self.max_keys.unwrap_or(usize::MAX),
                });
            }
        }
        let hasher = &self.hasher;
        shard
            .table
            .insert_unique(hash, (key, state), |(k, _)| hasher.hash_one(k));
        Ok(())
    }

    fn drop_full(&self, shard: &mut Shard<K, A::State>, now: u64) {
        let elapsed = now.saturating_sub(shard.last_sweep);
        // `u64::MAX` means no horizon: never clear such states.
        if elapsed >= self.horizon && self.horizon != u64::MAX {
            // Every state was written at least horizon / 2 ago and so is
            // full by now; `is_full` could misread its wrapped time (a
            // `sweep` after a long idle gap lands here).
            shard.table.clear();
        } else {
            let algorithm = &self.algorithm;
            shard.table.retain(|(_, s)| !algorithm.is_full(s, now));
        }
        shard.last_sweep = now;
    }

    /// Sweeps a shard often enough for wrapped scaled times to stay
    /// unambiguous: every state still held was written less than
    /// `horizon` ago, and is at most `horizon / 2` ahead of its write.
    #[inline]
    fn keep_unambiguous(&self, shard: &mut Shard<K, A::State>, now: u64) {
        let elapsed = now.saturating_sub(shard.last_sweep);
        if elapsed >= self.half_horizon {
            self.drop_full(shard, now);
        }
    }
}

/// Locks a shard.
///
/// A shard's lock is held for a few nanoseconds (one probe and one
/// decision), so it is a spin lock: taking and releasing it costs one atomic
/// read-modify-write and one plain store, where a parking mutex needs two
/// read-modify-writes. A waiter spins briefly, then yields its core, then
/// sleeps, so a holder that is preempted, or busy growing or sweeping its
/// shard, is not starved.
#[inline]
fn lock<T>(m: &SpinMutex<T>) -> SpinMutexGuard<'_, T> {
    match m.try_lock_weak() {
        Some(guard) => guard,
        None => lock_contended(m),
    }
}

#[cold]
#[inline(never)]
fn lock_contended<T>(m: &SpinMutex<T>) -> SpinMutexGuard<'_, T> {
    let mut waited = 0u32;
    loop {
        while m.is_locked() {
            if waited < 64 {
                std::hint::spin_loop();
            } else if waited < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(10));
            }
            waited = waited.saturating_add(1);
        }
        if let Some(guard) = m.try_lock_weak() {
            return guard;
        }
    }
}

impl<A: Algorithm + std::fmt::Debug, K> std::fmt::Debug for MemoryStore<A, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("algorithm", &self.algorithm)
            .field("shards", &self.shards.len())
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}
