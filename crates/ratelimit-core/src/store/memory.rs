//! The in-memory keyed store: sharded, concurrent and bounded.

use super::ban::BanPolicy;
use super::deny_cache::Constants;
use super::guess;
use super::shard::{At, Shard, ShardCell, StoreCounts, INSERT_STEP};
use super::shard_lock::Readers;
use super::{BanLeftFuture, Store};
use crate::algorithm::StableKey;
use crate::{Algorithm, Decision, StoreError};
use hashbrown::DefaultHashBuilder;
use std::borrow::Borrow;
use std::future::{ready, Ready};
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

/// Buckets each shard sweeps per [`MemoryStore::maintain`] call.
const MAINTAIN_STEP: usize = 16 * 1024;

/// A concurrent keyed store: every key has its own state, created full on
/// first use, and every check of a key is atomic.
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(1)).unwrap());
/// assert!(store.check_now("alice", 1, 0).unwrap().allowed);
/// assert!(store.check_now("alice", 1, 0).unwrap().allowed);
/// assert!(!store.check_now("alice", 1, 0).unwrap().allowed);
/// assert!(store.check_now("bob", 1, 0).unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
///
/// Keys are spread over shards, each a lock around a hash table. A check is
/// one hash, one uncontended lock and a few integer operations; nothing on
/// it grows with the number of keys. Denials of a hot key, and denials of
/// keys among many, are answered without writing shared memory.
///
/// Keys whose state is full again are dropped, as they carry no
/// information: on inserts, by [`maintain`](Self::maintain), and by
/// [`sweep`](Self::sweep). An optional cap ([`MemoryStoreBuilder::max_keys`])
/// bounds the keys with state; [`AtCapacity`] says what a new key does at
/// the cap. An evicted key that comes back starts at least as used as it
/// left, so eviction gives nothing back.
///
/// The design (the read side for denials, the deny slots, the hot slot,
/// memory per key, bounded memory, the sketch of evicted keys) is in
/// [docs/design/memory-store.md](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/design/memory-store.md).
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
/// use ratelimit_core::{Gcra, MemoryStore};
/// use ratelimit_core::store::AtCapacity;
/// use std::time::Duration;
///
/// let store = MemoryStore::builder(Gcra::new(10, Duration::from_secs(1)).unwrap())
///     .max_keys(Some(100_000))
///     .at_capacity(AtCapacity::Evict)
///     .build();
/// assert!(store.check_now("alice", 1, 0).unwrap().allowed);
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
    /// its cell and its readers' counts whether or not it holds keys; a
    /// store of few keys can take fewer.
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
    /// zeroes them.
    pub fn counts(&self) -> StoreCounts {
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
    /// This is [`Store::check_now`](crate::Store::check_now) for a store
    /// that always answers at once: the decision itself, not an `Option`
    /// of it; it also takes a borrowed key (`&str` for `String` keys). On
    /// a `MemoryStore` it hides the trait's method; through an `Arc` or a
    /// generic `S: Store` the trait's method is called.
    #[inline(always)]
    pub fn check_now<Q>(&self, key: &Q, cost: u64, now: u64) -> Result<Decision, StoreError>
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

    /// [`check_now`](Self::check_now) of a key the store does not hold,
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

    /// [`check_now`](Self::check_now) under the shard's lock, when the
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
    /// [`Algorithm::refund`]). The synchronous form of
    /// [`Store::refund`](crate::Store::refund).
    pub fn refund_now<Q>(&self, key: &Q, cost: u64, admitted_at: u64, now: u64)
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
    /// back `reserved - actual` as [`refund_now`](Self::refund_now)
    /// does. The synchronous form of [`Store::settle`](crate::Store::settle);
    /// returns what a peek at `now` tells after it (`allowed` false: in
    /// debt).
    ///
    /// The key's remembered denial is forgotten, so its next check is
    /// decided on the settled state (a key in debt is denied with the
    /// debt's wait, and remembered again). A ban stands as it was. A key
    /// the store does not hold settles from the state its next check would
    /// start from (full, or what the sketch of evicted keys says); a key
    /// left in debt is inserted, so this fails as a check does when the
    /// cap is reached with [`AtCapacity::Refuse`].
    pub fn settle_now<Q>(
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

    /// One state's settlement (see [`settle_now`](Self::settle_now)).
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

    /// Bans `key` for `duration` from `now` (see
    /// [`Store::ban`](crate::Store::ban)), whether or not the store bans
    /// on denials; replaces a ban already standing.
    pub fn ban_now<Q>(&self, key: &Q, duration: Duration, now: u64)
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
    pub fn unban_now<Q>(&self, key: &Q)
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
    pub fn banned_for<Q>(&self, key: &Q, now: u64) -> Option<Duration>
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
    /// seen (see [`Store::reset`](crate::Store::reset)); its remembered
    /// denial goes too. Returns whether the key had state.
    ///
    /// The sketch of evicted keys (see the type's docs, "At the cap") is
    /// left as it is: its cells are shared with other evicted keys, and
    /// lowering one would give those keys quota back. So a key evicted at
    /// the cap, then reset while its sketch cells still stand, starts as
    /// used as those cells say (erring toward denying, as eviction does);
    /// a key that had state when reset starts full.
    pub fn reset_now<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let (cell, at) = self.cell(hash);
        let (mut shard, _, _) = cell.enter(at, 0);
        let had = shard.remove(hash, |(k, _)| k.borrow() == key);
        cell.forget(hash);
        had
    }

    /// Drops every key whose state is full at `now`, every ban whose
    /// offences are forgotten by then and what the sketch of evicted keys
    /// holds of keys all full by then, and gives unused memory back.
    /// Returns the number of keys left.
    ///
    /// This is a whole pass over every shard (each shard's lock is held
    /// for its own pass); [`maintain`](Self::maintain) does the same in
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
    /// request arrives.
    pub fn maintain(&self, now: u64) -> usize {
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

impl<A, K> Store<K> for MemoryStore<A, K>
where
    A: Algorithm,
    K: Hash + Eq + StableKey + Clone + Send + Sync + 'static,
{
    type CheckFuture = Ready<Result<Decision, StoreError>>;
    type RefundFuture = Ready<Result<(), StoreError>>;

    #[inline]
    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture {
        ready(MemoryStore::check_now(self, key, cost, now))
    }

    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture {
        MemoryStore::refund_now(self, key, cost, admitted_at, now);
        ready(Ok(()))
    }

    #[inline]
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>> {
        Some(MemoryStore::check_now(self, key, cost, now))
    }

    fn refund_now(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        MemoryStore::refund_now(self, key, cost, admitted_at, now);
        Some(Ok(()))
    }

    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        Some(MemoryStore::settle_now(
            self,
            key,
            reserved,
            actual,
            admitted_at,
            now,
        ))
    }

    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        MemoryStore::reset_now(self, key);
        Some(Ok(()))
    }

    fn ban_now(
        &self,
        key: &K,
        duration: std::time::Duration,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        MemoryStore::ban_now(self, key, duration, now);
        Some(Ok(()))
    }

    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        MemoryStore::unban_now(self, key);
        Some(Ok(()))
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        Box::pin(ready(Ok(MemoryStore::banned_for(self, key, now))))
    }

    fn maintain(&self, now: u64) {
        MemoryStore::maintain(self, now);
    }

    fn counts(&self) -> Option<StoreCounts> {
        Some(MemoryStore::counts(self))
    }
}
