//! The in-memory keyed store: sharded, concurrent and bounded.

use super::ban::BanPolicy;
use super::deny_cache::Constants;
use super::guess;
use super::shard::{At, Shard, ShardCell, StoreCounts, INSERT_STEP};
use super::shard_lock::Readers;
use super::{Answer, BanLeftFuture, NeverPending, SettleFuture, Store, Upkeep};
use crate::{Algorithm, Decision, StableKey, StoreError};
use hashbrown::DefaultHashBuilder;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::time::Duration;

/// Keys at a shard's cap per cell of a row of its sketch of evicted keys
/// (the set of evicted keys in front of it is sized by the same width).
const EVICTED_KEYS_PER_CELL: usize = 1;

/// Default shards per CPU, and the bounds of the default (see
/// [`MemoryStoreBuilder::shards`]).
const SHARDS_PER_CPU: usize = 16;
const MIN_SHARDS: usize = 32;
const MAX_SHARDS: usize = 1024;

/// The least share of a cap on keys a shard gets by default.
const MIN_SHARE: usize = 32;

/// The default shard count (see [`MemoryStoreBuilder::shards`]), a power
/// of two.
fn default_shards(max_keys: Option<usize>) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = (cpus * SHARDS_PER_CPU)
        .clamp(MIN_SHARDS, MAX_SHARDS)
        .next_power_of_two();
    match max_keys {
        Some(m) => shards.min(1 << (m / MIN_SHARE).max(1).ilog2()),
        None => shards,
    }
}

/// Buckets each shard sweeps per [`Upkeep::maintain`] call.
const MAINTAIN_STEP: usize = 16 * 1024;

/// A concurrent keyed store: every key has its own state, created full on
/// first use, and every check of a key is atomic.
///
/// # Layout and cost
///
/// Keys are spread over shards (a power of two, by default 16 per CPU,
/// 32 to 1,024, fewer under a small cap on keys; see
/// [`MemoryStoreBuilder::shards`]), each a lock around a
/// [`hashbrown::HashTable`] of
/// `(key, state)` pairs, hashed once per check with a randomly seeded
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
/// An optional cap ([`MemoryStoreBuilder::max_keys`]) bounds the number of
/// keys with state, split evenly over the shards. A new key that finds its
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
pub struct MemoryStore<A: Algorithm, K> {
    algorithm: A,
    shards: Box<[ShardCell<K, A::State>]>,
    hasher: DefaultHashBuilder,
    shard_shift: u32,
    shard_cap: usize,
    max_keys: Option<usize>,
    at_capacity: AtCapacity,
    deny_cache: bool,
    promote_always: bool,
    constants: Constants,
    half_horizon: u64,
    /// Cells per row of each shard's sketch of evicted keys.
    evicted_width: usize,
    /// What a denial costs a key, if anything (boxed: rarely set).
    ban: Option<Box<BanPolicy>>,
    /// Whether a check guessed to be denied first reads its shard without
    /// writing it (the algorithm can tell a denial so, and no ban policy
    /// needs to see it).
    read_denials: bool,
    /// Which threads read which shard.
    readers: Readers,
}

/// What a [`MemoryStore`] at its cap does with a new key when none of the
/// sampled keys is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AtCapacity {
    /// Evict the sampled key nearest to full (the default): new clients
    /// are still limited.
    #[default]
    Evict,
    /// Fail the check with [`StoreError::CapacityExceeded`]; the caller's
    /// failure policy decides.
    Refuse,
}

/// Builds a [`MemoryStore`] with a shard count or a cap on keys. The key
/// type `K` is the store's, usually inferred from where the store is used.
///
/// ```
/// use ratelimit_core::{AtCapacity, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::builder(Gcra::new(10, Duration::from_secs(1)).unwrap())
///     .max_keys(Some(100_000))
///     .at_capacity(AtCapacity::Evict)
///     .build();
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder<A, K> {
    algorithm: A,
    /// `None`: the default (see [`MemoryStoreBuilder::shards`]).
    shards: Option<usize>,
    max_keys: Option<usize>,
    at_capacity: AtCapacity,
    deny_cache: bool,
    promote_always: bool,
    ban: Option<BanPolicy>,
    key: PhantomData<fn() -> K>,
}

impl<A: Algorithm, K> MemoryStoreBuilder<A, K> {
    /// The number of shards, rounded up to a power of two (1 to 65,536;
    /// with a cap on keys, at most the cap).
    ///
    /// The default is 16 per CPU, at least 32 and at most 1,024. Two
    /// threads whose keys fall in one shard at once take turns, and while
    /// one waits the shard's line moves between their cores more than
    /// once: more shards make that rarer, while a thread alone gains
    /// nothing from them and caches more of their lines
    /// (BENCHMARKS.md, "Keyed check", weighs the two). Each shard costs
    /// 1,184 bytes (its cell and its readers' counts) whether or not it
    /// holds keys; a store of few keys can take fewer.
    ///
    /// With a cap on keys ([`max_keys`](Self::max_keys)), the default is
    /// also at most one shard per 32 keys of the cap (rounded down to a
    /// power of two): each shard's share of the cap is then at least 32
    /// keys, so shards that fill before the others (keys do not spread
    /// exactly evenly) evict while the store is still nearly as full as
    /// its cap, and the sketch of evicted keys keeps its one cell a row
    /// per capped key.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// A hard cap on the number of keys with state. `None` (the default)
    /// means no cap. The cap is split evenly over the shards, rounded
    /// down (a store with a cap has no more shards than the cap), so the
    /// store never holds more than `max_keys` keys.
    pub fn max_keys(mut self, max_keys: Option<usize>) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What happens to a new key at the cap (default: evict).
    pub fn at_capacity(mut self, at_capacity: AtCapacity) -> Self {
        self.at_capacity = at_capacity;
        self
    }

    /// Whether denied keys are answered from the lock-free slots (default
    /// on; decisions are the same either way).
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = on;
        self
    }

    /// Bans a key when its limit denies it with nothing left (`remaining`
    /// 0, and a `wait`: not a request that can never fit; default: no
    /// ban): every check
    /// of it is then denied until the ban ends, whatever the algorithm
    /// says (see [`BanPolicy`]). Bans live in each shard, at most the
    /// shard's share of [`max_keys`](Self::max_keys) of them.
    pub fn ban(mut self, ban: Option<BanPolicy>) -> Self {
        self.ban = ban;
        self
    }

    /// For tests of the hot slot: a key's state moves there on its second
    /// check in a row, whether or not the shard's lock was contended
    /// (decisions are the same either way).
    #[doc(hidden)]
    pub fn promote_always(mut self, on: bool) -> Self {
        self.promote_always = on;
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore<A, K> {
        let mut shards = match self.shards {
            Some(shards) => shards.clamp(1, 1 << 16).next_power_of_two(),
            None => default_shards(self.max_keys),
        };
        if let Some(m) = self.max_keys {
            // No more shards than keys, so that the shares add up to at
            // most the cap.
            let fit = 1usize << m.max(1).ilog2();
            shards = shards.min(fit);
        }
        let bits = shards.trailing_zeros();
        let shard_cap = self.max_keys.map_or(usize::MAX, |m| (m / shards).max(1));
        let deny_cache = self.deny_cache && self.algorithm.caches_denials();
        let readers = Readers::new(shards);
        let shards = (0..shards)
            .map(|_| ShardCell::new(self.algorithm.fresh(&(), 0)))
            .collect();
        let read_denials = self.ban.is_none() && self.algorithm.denies_read_only();
        MemoryStore {
            read_denials,
            readers,
            half_horizon: self.algorithm.idle_horizon() / 2,
            constants: Constants {
                limit: self.algorithm.limit(),
                window: self.algorithm.window(),
            },
            algorithm: self.algorithm,
            shards,
            hasher: DefaultHashBuilder::default(),
            // The top 7 bits feed hashbrown's tags; take the shard from the
            // bits below them.
            shard_shift: 57 - bits,
            shard_cap,
            max_keys: self.max_keys,
            at_capacity: self.at_capacity,
            deny_cache,
            promote_always: self.promote_always,
            evicted_width: (shard_cap / EVICTED_KEYS_PER_CELL).clamp(16, 1 << 20),
            ban: self.ban.map(Box::new),
        }
    }
}

impl<A: Algorithm, K> MemoryStore<A, K> {
    /// A store for `algorithm`, with the default shard count and no cap.
    pub fn new(algorithm: A) -> Self {
        Self::builder(algorithm).build()
    }

    /// A builder, to set the shard count or a cap on keys.
    pub fn builder(algorithm: A) -> MemoryStoreBuilder<A, K> {
        MemoryStoreBuilder {
            algorithm,
            shards: None,
            max_keys: None,
            at_capacity: AtCapacity::Evict,
            deny_cache: true,
            promote_always: false,
            ban: None,
            key: PhantomData,
        }
    }

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
    fn cells(&self) -> impl Iterator<Item = (&ShardCell<K, A::State>, At<'_>)> {
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
    fn cell(&self, hash: u64) -> (&ShardCell<K, A::State>, At<'_>) {
        // The bits just below the top 7 (those feed hashbrown's tags).
        let index = (hash >> self.shard_shift) as usize & (self.shards.len() - 1);
        (&self.shards[index], (&self.readers, index))
    }

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
    /// What [`Store::check`] answers, at once.
    #[inline(always)]
    fn check_key<Q>(&self, key: &Q, cost: u64, now: u64) -> Result<Decision, StoreError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + StableKey + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        if cost == 1 && self.deny_cache {
            if let Some(denied) = cell.remembered(hash, now, self.constants) {
                return Ok(denied);
            }
        }
        cell.prefetch(hash);
        if self.read_denials && !guess::likely_admitted() {
            if let Some(denied) = self.check_read(cell, at, hash, key, cost, now) {
                return Ok(denied);
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
                    return Ok(decision);
                }
                // Probed once: a new key goes straight to its insert.
                None => return self.check_unheld(cell, &mut shard, hash, key, cost, now),
            }
        }
        self.check_locked(cell, &mut shard, hash, key, cost, now, promote)
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
        K: Borrow<Q>,
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
        K: Borrow<Q>,
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

    /// Gives back `cost` that `key` was admitted at `admitted_at`, for
    /// policies that count only some outcomes (see
    /// [`Algorithm::refund`]), at once: what [`Store::refund`] does.
    fn refund_key<Q>(&self, key: &Q, cost: u64, admitted_at: u64, now: u64)
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
    fn settle_key<Q>(
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

    /// The denial of a banned key with `left` ns of its ban to run.
    fn ban_decision(&self, left: u64) -> Decision {
        let c = self.constants;
        Decision::ban(c.limit, c.window, Duration::from_nanos(left))
    }

    /// Bans `key` for `duration` from `now` (see [`Store::ban`]), whether
    /// or not the store bans on denials; replaces a ban already standing.
    fn ban_key<Q>(&self, key: &Q, duration: Duration, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, now, _) = cell.enter(at, now);
        let until = now.saturating_add(crate::duration::saturating_nanos(duration));
        shard.bans_mut(self.shard_cap).set(hash, until);
        cell.forget(hash);
    }

    /// Lifts `key`'s ban and forgets its offences (what it used stays
    /// used).
    fn unban_key<Q>(&self, key: &Q)
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
    fn ban_left_key<Q>(&self, key: &Q, now: u64) -> Option<Duration>
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
    fn reset_key<Q>(&self, key: &Q)
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
        K: Borrow<Q>,
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

    fn insert(
        &self,
        cell: &ShardCell<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: K,
        state: A::State,
        now: u64,
    ) -> Result<(), StoreError> {
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
        shard.insert(hash, key, state, |k| hasher.hash_one(k));
        cell.placed(shard);
        Ok(())
    }

    /// Sweeps a shard often enough for wrapped scaled times to stay
    /// unambiguous: every state still held was written less than
    /// `horizon` ago, and is at most `horizon / 2` ahead of its write.
    #[inline]
    fn keep_unambiguous(&self, shard: &mut Shard<K, A::State>, now: u64) {
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
        Answer::ready(self.check_key(key, cost, now))
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

impl<A: Algorithm, K: Hash + Eq> Upkeep for MemoryStore<A, K> {
    fn maintain(&self, now: u64) -> usize {
        self.maintain_step(now)
    }

    fn counts(&self) -> Option<StoreCounts> {
        Some(self.sum_counts())
    }
}
