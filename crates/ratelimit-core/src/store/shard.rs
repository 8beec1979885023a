//! One shard of the memory store: a hash table behind its lock (see
//! `shard_lock`), its time, and the bounded passes that keep it small.

use super::ban::Bans;
use super::deny_cache::{Constants, DenySlots, InUse};
use super::evicted::Evicted;
use super::prefetch::Place;
use super::shard_lock::{ReadGuard, Readers, ShardLock, WriteGuard};
use crate::plumbing::saturating_nanos;
use crate::Algorithm;
use crate::Decision;
use hashbrown::HashTable;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets a new key's insert sweeps for full keys, wherever the table is.
pub(super) const INSERT_STEP: usize = 4;
/// Occupied buckets looked at to pick a key to evict at the cap.
pub(super) const EVICTION_SAMPLE: usize = 8;
/// Buckets scanned for that sample (when evicting, further only until
/// one key is seen).
const EVICTION_SCAN: usize = 64;
/// Below this capacity a table is not shrunk.
const MIN_SHRINK_CAPACITY: usize = 64;

/// Where a shard's readers are counted: the store's counts and the
/// shard's index.
pub(super) type At<'a> = (&'a Readers, usize);

/// A shard and what may be read without its lock.
///
/// A check through the lock (every check but a denial decided by reading,
/// see [`ShardLock`]) writes the lock's word, `latest` when its clock
/// moved, the key's state and, when it found the lock held, the hot hash;
/// a denial writes the denied tag when it names another key; an insert also
/// writes the table's header and the sweep cursor. Laid out in that
/// order from the start of a 128-byte block, with the hot state (see
/// [`Shard`]) after them, they share one cache line, so a check or an
/// insert of a key other threads also use moves one line between cores,
/// not two. What else a check reads
/// (`last_sweep`, where the hot state belongs) is on the next line,
/// written only by whole passes and by moves of the hot state. The deny
/// slots start on a line of their own.
///
/// A cell is an odd multiple of 128 bytes long (see [`Stagger`]).
#[repr(C, align(128))]
pub(super) struct ShardCell<K, S> {
    /// The latest time a check of this shard was decided at under the
    /// lock, written only under it and read without it by the deny slots
    /// and by checks that read the shard.
    ///
    /// Callers read their clock before they take the lock, so a caller
    /// that was preempted in between arrives with a time older than a
    /// state another caller has already written. Algorithms need time
    /// never to go back for a key; such a check is decided at the shard's
    /// latest time instead, as if it had arrived a moment later.
    latest: AtomicU64,
    /// The shard's data behind its writer's word (see [`ShardLock`]).
    pub(super) lock: ShardLock<Shard<K, S>>,
    /// Which deny slots hold a denial: right after the shard's data, on
    /// the line of its `bans`, which every check reads.
    used: InUse,
    /// Where the table lies, for a check to prefetch its key's lines: on
    /// the same line, read by every check, written when the table grows
    /// or shrinks and when a key's state moves to the hot slot.
    place: Place,
    denied: DenySlots,
    stagger: Stagger,
}

/// 128 bytes never read or written, that make a [`ShardCell`] 9 × 128
/// bytes long where it would be 8 × 128. A first-level data cache picks a
/// line's set from the address bits below 4 KiB (64 sets of 64 bytes),
/// so cells 1 KiB apart put their first lines, which every check reads,
/// in only 4 sets: with 32 shards, 8 lines in each, as many as a set
/// holds, and every other line that falls there evicts one of them. At
/// 1,152 bytes apart, 32 cells' first lines fall in 32 sets.
#[repr(C, align(128))]
struct Stagger([u8; 128]);

impl<K, S> ShardCell<K, S> {
    /// A shard with no keys; `spare` is any state, kept in the hot slot
    /// until a key's state moves there.
    pub(super) fn new(spare: S) -> Self {
        Self {
            latest: AtomicU64::new(0),
            lock: ShardLock::new(Shard {
                table: HashTable::new(),
                cursor: 0,
                hot_hash: 0,
                denied_tag: 0,
                hot_state: spare,
                last_sweep: 0,
                pass_start: 0,
                hot_index: 0,
                hot_live: false,
                evicted: None,
                counts: StoreCounts::default(),
                bans: None,
            }),
            used: InUse::default(),
            place: Place::default(),
            denied: DenySlots::default(),
            stagger: Stagger([0; 128]),
        }
    }

    /// The remembered denial of a cost-1 check of the key hashed `hash`
    /// at `now`, if one stands (see [`DenySlots::denied`]).
    #[inline]
    pub(super) fn remembered(&self, hash: u64, now: u64, c: Constants) -> Option<Decision> {
        self.denied.denied(&self.used, hash, now, &self.latest, c)
    }

    /// Remembers a denial of a cost-1 check (under the lock): its `wait`,
    /// `reset` and `banned` (taken by value, so that the caller's decision
    /// need not be in memory: it stays in registers until it is returned).
    #[cold]
    #[inline(never)]
    pub(super) fn remember(
        &self,
        hash: u64,
        now: u64,
        wait: Option<Duration>,
        reset: Duration,
        banned: bool,
    ) {
        self.denied
            .remember(&self.used, hash, now, wait, reset, banned);
    }

    /// Asks for the lines a lookup of the key hashed `hash` reads, before
    /// the lock is taken (see [`Place`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, hash: u64) {
        self.place.prefetch::<(K, S)>(hash);
    }

    /// Records where `shard`'s table lies (under the lock, after a change
    /// that may have reallocated it).
    pub(super) fn placed(&self, shard: &Shard<K, S>) {
        self.place.update(&shard.table);
    }

    /// What the prefetches know of this shard, for
    /// [`Shard::check_state`] to tell it of a move to the hot slot.
    #[inline(always)]
    pub(super) fn place(&self) -> &Place {
        &self.place
    }

    /// Forgets the key hashed `hash`'s remembered denial (under the lock).
    #[inline]
    pub(super) fn forget(&self, hash: u64) {
        self.denied.forget(&self.used, hash);
    }

    /// Forgets every remembered denial (under the lock).
    pub(super) fn forget_all(&self) {
        self.denied.clear(&self.used);
    }

    /// The shard's latest time (see `latest`).
    #[inline(always)]
    pub(super) fn latest(&self) -> u64 {
        self.latest.load(Ordering::Relaxed)
    }

    /// Locks the shard and moves its time to `now` if that is later;
    /// returns the guard, the time to decide at, and whether another
    /// thread held the lock or read the shard.
    #[inline]
    pub(super) fn enter(&self, at: At<'_>, now: u64) -> (WriteGuard<'_, Shard<K, S>>, u64, bool) {
        let (shard, contended) = self.lock.write(at.0, at.1);
        // Under the lock: no other writer, and the lock orders it.
        let latest = self.latest.load(Ordering::Relaxed);
        let now = if now > latest {
            self.latest.store(now, Ordering::Relaxed);
            now
        } else {
            latest
        };
        (shard, now, contended)
    }

    /// The shard, for writing (its time stays as it is).
    pub(super) fn write(&self, at: At<'_>) -> WriteGuard<'_, Shard<K, S>> {
        self.lock.write(at.0, at.1).0
    }

    /// The shard for reading, unless a writer holds it.
    #[inline(always)]
    pub(super) fn read<'a>(&'a self, at: At<'a>) -> Option<ReadGuard<'a, Shard<K, S>>> {
        self.lock.read(at.0, at.1)
    }
}

/// A shard's table, its sweep, and its hot slot; in this order
/// (`repr(C)`): what checks and inserts write first.
///
/// # The hot slot
///
/// When every core checks one key, each admitted check writes its state;
/// in its bucket that is a second cache line moving between cores besides
/// the lock's. So a key whose checks meet the lock held by another thread
/// twice in a row moves its state to `hot_state`, on the lock's line,
/// swapping in the state that was there, while the key stays in its
/// bucket, read-only. Only states of up to 8 bytes move (larger ones
/// would not fit the line). Any change to the table other than a check or
/// a refund first moves the state back ([`Shard::settle`]), so bucket
/// indexes are stable while it is out, and every pass over the table sees
/// every state.
#[repr(C)]
pub(super) struct Shard<K, S> {
    table: HashTable<(K, S)>,
    /// Where the next bounded sweep step starts (a bucket index; a shard
    /// of more than 2^32 buckets, 64 GiB of 16-byte entries, would sweep
    /// only its first 2^32 in steps).
    cursor: u32,
    /// The low bits of the hash of the key of the latest contended check
    /// (two keys that share them can only move a state early).
    hot_hash: u16,
    /// The low bits of the hash of the key of the latest denial decided
    /// under the lock (see [`Shard::denied_again`]).
    denied_tag: u16,
    /// The state of the key in bucket `hot_index` while `hot_live`;
    /// otherwise a spare state, never read.
    hot_state: S,
    /// The start of the latest whole pass that dropped every key full at
    /// the time it was visited: every state still held was written after
    /// `last_sweep - horizon / 2` (see `MemoryStore::keep_unambiguous`).
    pub(super) last_sweep: u64,
    /// When the current pass of sweep steps started.
    pass_start: u64,
    hot_index: usize,
    hot_live: bool,
    /// What the keys evicted at the cap had used, from the first eviction
    /// on (see [`Evicted`]).
    evicted: Option<Box<Evicted>>,
    /// Counts of evictions and of the new keys they made start used.
    pub(super) counts: StoreCounts,
    /// The banned keys, from the first ban on.
    pub(super) bans: Option<Box<Bans>>,
}

/// How many keys a store holds and what eviction at its cap did: see
/// [`Upkeep::counts`](super::Upkeep::counts).
///
/// ```
/// use ratelimit_core::{store::Upkeep, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// store.check("alice", 1, 0).value().unwrap();
/// let counts = store.counts().unwrap();
/// assert_eq!((counts.keys, counts.evicted), (1, 0));
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreCounts {
    /// Keys with state.
    pub keys: u64,
    /// Keys evicted at the cap while they still held quota.
    pub evicted: u64,
    /// New keys that started from what evicted keys had used (the
    /// sketch's estimate covered them).
    pub restored: u64,
    /// Of those, the ones refused at their first check: a new key
    /// refused because the key table is full and evicted keys' use
    /// covers it. A steady count means a flood of more evicted keys
    /// within a period than the set of evicted keys holds (see
    /// [`MemoryStore`](crate::MemoryStore), "At the cap").
    pub refused: u64,
}

impl std::ops::AddAssign for StoreCounts {
    fn add_assign(&mut self, other: Self) {
        self.keys += other.keys;
        self.evicted += other.evicted;
        self.restored += other.restored;
        self.refused += other.refused;
    }
}

impl<K, S> Shard<K, S> {
    /// Whether states of this type move to the hot slot.
    const HOT: bool = std::mem::size_of::<S>() <= 8;

    /// The number of keys.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Drops every key and frees the table, and forgets what evicted keys
    /// had used.
    pub(super) fn clear(&mut self) {
        self.settle();
        self.table = HashTable::new();
        self.cursor = 0;
        self.evicted = None;
        self.counts = StoreCounts::default();
        self.bans = None;
    }

    /// The shard's bans, made (holding at most `cap`) on first use.
    pub(super) fn bans_mut(&mut self, cap: usize) -> &mut Bans {
        self.bans.get_or_insert_with(|| Box::new(Bans::new(cap)))
    }

    /// Lifts the ban of the key hashed `hash` and forgets its offences.
    pub(super) fn lift_ban(&mut self, hash: u64) {
        if let Some(bans) = self.bans.as_deref_mut() {
            bans.lift(hash);
        }
        self.drop_bans_if_empty();
    }

    /// Drops, in one bounded step of `buckets`, the bans forgotten by
    /// `now`.
    pub(super) fn sweep_bans(&mut self, now: u64, buckets: usize) {
        if let Some(bans) = self.bans.as_deref_mut() {
            bans.sweep_step(now, buckets);
        }
        self.drop_bans_if_empty();
    }

    /// Frees the table of bans once it holds none: a shard with no bans
    /// is checked on the common path again (and read for denials).
    fn drop_bans_if_empty(&mut self) {
        if self.bans.as_deref().is_some_and(Bans::is_empty) {
            self.bans = None;
        }
    }

    /// The use a new key hashed `hash` starts with at `now`: what it had
    /// when it was evicted, at least, if it was and would not be full yet
    /// (0 while nothing was ever evicted).
    #[inline]
    pub(super) fn evicted_use(&self, hash: u64, now: u64) -> u64 {
        match &self.evicted {
            None => 0,
            Some(sketch) => sketch.used(hash, now),
        }
    }

    /// The state of the key hashed `hash` that `eq` matches, for a check,
    /// or `None` if the table does not hold it. `contended`: the lock was
    /// held by another thread when this check came; the second such check
    /// in a row of one key moves its state to the hot slot, and `place`
    /// learns its hash.
    #[inline(always)]
    pub(super) fn check_state(
        &mut self,
        hash: u64,
        eq: impl FnMut(&(K, S)) -> bool,
        contended: bool,
        place: &Place,
    ) -> Option<&mut S> {
        let index = self.table.find_bucket_index(hash, eq)?;
        if Self::HOT {
            let tag = hash as u16;
            if self.hot_live && self.hot_index == index {
                if contended && self.hot_hash != tag {
                    // (Two keys contended in turn then stay where they are.)
                    self.hot_hash = tag;
                }
                return Some(&mut self.hot_state);
            }
            if contended {
                if self.hot_hash == tag {
                    self.settle();
                    let (_, bucket) = self.table.get_bucket_mut(index)?;
                    std::mem::swap(bucket, &mut self.hot_state);
                    self.hot_index = index;
                    self.hot_live = true;
                    place.hot(hash);
                    return Some(&mut self.hot_state);
                }
                self.hot_hash = tag;
            }
        }
        self.table.get_bucket_mut(index).map(|(_, s)| s)
    }

    /// The state of the key hashed `hash` that `eq` matches, read only
    /// (from the hot slot if it is there).
    #[inline(always)]
    pub(super) fn peek_state(&self, hash: u64, eq: impl FnMut(&(K, S)) -> bool) -> Option<&S> {
        let index = self.table.find_bucket_index(hash, eq)?;
        if Self::HOT && self.hot_live && self.hot_index == index {
            return Some(&self.hot_state);
        }
        self.table.get_bucket(index).map(|(_, s)| s)
    }

    /// Records a denial of the key hashed `hash`, decided under the lock,
    /// and tells whether the shard's previous such denial was of the same
    /// key: whether the key is denied again and again (a hot key), so that
    /// remembering it in the shard's deny slots pays. A denial of a key
    /// among many is not remembered, so it writes no slot that other
    /// threads read, and writes this tag only when it changes (the tag is
    /// on the lock's cache line, which the check has written already).
    /// Two keys that share the tag's bits can only be remembered early.
    #[inline]
    pub(super) fn denied_again(&mut self, hash: u64) -> bool {
        let tag = hash as u16;
        if self.denied_tag == tag {
            return true;
        }
        self.denied_tag = tag;
        false
    }

    /// The state of the key hashed `hash` that `eq` matches, for a refund
    /// (which changes a state, not the table), wherever it is.
    pub(super) fn refund_state(
        &mut self,
        hash: u64,
        eq: impl FnMut(&(K, S)) -> bool,
    ) -> Option<&mut S> {
        let index = self.table.find_bucket_index(hash, eq)?;
        if self.hot_live && self.hot_index == index {
            return Some(&mut self.hot_state);
        }
        self.table.get_bucket_mut(index).map(|(_, s)| s)
    }

    /// Moves the hot state back to its key's bucket: every change to the
    /// table other than a check or a refund starts here.
    #[inline]
    pub(super) fn settle(&mut self) {
        if self.hot_live {
            self.hot_live = false;
            if let Some((_, bucket)) = self.table.get_bucket_mut(self.hot_index) {
                std::mem::swap(bucket, &mut self.hot_state);
            }
        }
    }

    /// Removes the key hashed `hash` that `eq` matches, if the table holds
    /// it (a reset). Returns whether it did.
    pub(super) fn remove(&mut self, hash: u64, eq: impl FnMut(&(K, S)) -> bool) -> bool {
        self.settle();
        match self.table.find_entry(hash, eq) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Inserts a key that the table does not hold.
    pub(super) fn insert(&mut self, hash: u64, key: K, state: S, rehash: impl Fn(&K) -> u64) {
        self.settle();
        self.table
            .insert_unique(hash, (key, state), |(k, _)| rehash(k));
    }

    /// Gives back all the memory the table does not need, and what the
    /// sketch of evicted keys holds of keys all full by `now`.
    pub(super) fn shrink_to_fit(&mut self, now: u64, rehash: impl Fn(&K) -> u64) {
        self.settle();
        self.expire_evicted(now);
        self.table.shrink_to_fit(|(k, _)| rehash(k));
        self.cursor = 0;
    }

    /// Drops every key whose state is full at `now` (a whole pass).
    pub(super) fn drop_full<A: Algorithm<State = S>>(&mut self, algorithm: &A, now: u64) {
        self.settle();
        let horizon = algorithm.idle_horizon();
        let elapsed = now.saturating_sub(self.last_sweep);
        // `u64::MAX` means no horizon: never clear such states.
        if elapsed >= horizon && horizon != u64::MAX {
            // Every state was written at least horizon / 2 ago and so is
            // full by now; `is_full` could misread its wrapped time (a
            // `sweep` after a long idle gap lands here).
            self.table.clear();
        } else {
            self.table.retain(|(_, s)| !algorithm.is_full(s, now));
        }
        self.last_sweep = now;
    }

    /// Frees what the sketch of evicted keys holds of keys all full by
    /// `now`.
    fn expire_evicted(&mut self, now: u64) {
        if let Some(sketch) = self.evicted.as_deref_mut() {
            sketch.expire(now);
        }
    }

    /// Visits `buckets` buckets from the cursor, dropping keys whose state
    /// is full at `now`; at the end of each pass over the table, shrinks it
    /// if it is less than a quarter full. Also frees what the sketch of
    /// evicted keys holds of keys all full by `now`. Returns the keys
    /// dropped.
    pub(super) fn sweep_step<A: Algorithm<State = S>>(
        &mut self,
        algorithm: &A,
        now: u64,
        buckets: usize,
        hash: impl Fn(&K) -> u64,
    ) -> usize {
        self.settle();
        self.expire_evicted(now);
        let n = self.table.num_buckets();
        if self.table.is_empty() {
            self.cursor = 0;
            self.shrink(&hash);
            self.pass_done(now, now);
            return 0;
        }
        let mut dropped = 0;
        let mut i = self.cursor as usize % n;
        for _ in 0..buckets.min(n) {
            if let Ok(entry) = self.table.get_bucket_entry(i) {
                if algorithm.is_full(&entry.get().1, now) {
                    entry.remove();
                    dropped += 1;
                }
            }
            i += 1;
            if i == n {
                i = 0;
                self.shrink(&hash);
                self.pass_done(self.pass_start, now);
                break;
            }
        }
        self.cursor = i as u32;
        dropped
    }

    /// A pass of sweep steps that started at `start` has visited every
    /// bucket: it counts as a whole sweep from `start` on, so a shard kept
    /// swept in steps never needs a whole pass on the request path.
    fn pass_done(&mut self, start: u64, now: u64) {
        self.last_sweep = self.last_sweep.max(start);
        self.pass_start = now;
    }

    fn shrink(&mut self, hash: impl Fn(&K) -> u64) {
        let (len, capacity) = (self.table.len(), self.table.capacity());
        if capacity > MIN_SHRINK_CAPACITY && len < capacity / 4 {
            self.table.shrink_to(len * 2, |(k, _)| hash(k));
            self.cursor = 0;
        }
    }

    /// Makes room for one key at the cap: removes the key
    /// [`pick`](Self::pick) chooses, writing what it had used into the
    /// sketch of evicted keys (of `width` cells a row, made on the first
    /// eviction). Returns the removed key's hash, or `None` when nothing
    /// could go.
    pub(super) fn make_room<A: Algorithm<State = S>>(
        &mut self,
        algorithm: &A,
        now: u64,
        seed: u64,
        evict: bool,
        width: usize,
        hash: impl Fn(&K) -> u64,
    ) -> Option<u64> {
        self.settle();
        let (index, reset, used) = self.pick(algorithm, now, seed, evict)?;
        let entry = self.table.get_bucket_entry(index).ok()?;
        let gone = hash(&entry.remove().0 .0);
        if reset > Duration::ZERO {
            self.counts.evicted += 1;
        }
        if used > 0 {
            let until = now.saturating_add(saturating_nanos(reset));
            self.evicted
                .get_or_insert_with(|| Box::new(Evicted::new(width)))
                .record(gone, used, until, now);
        }
        Some(gone)
    }

    /// The key to remove at the cap, as (bucket, time until full, whole
    /// requests used): samples a few keys from a random bucket (`seed`)
    /// on, and picks a full one if there is one, else, when `evict` is
    /// set, the one whose state is nearest to full (the least time until
    /// it is full). Without `evict` only a few buckets are looked at; with
    /// it, the scan goes on past empty buckets until it has seen a key.
    fn pick<A: Algorithm<State = S>>(
        &mut self,
        algorithm: &A,
        now: u64,
        seed: u64,
        evict: bool,
    ) -> Option<(usize, Duration, u64)> {
        let n = self.table.num_buckets();
        let mut best: Option<(usize, Duration, u64)> = None;
        let mut seen = 0;
        let start = seed.rotate_left(29) as usize;
        for step in 0..n {
            if seen == EVICTION_SAMPLE || (step >= EVICTION_SCAN && (seen > 0 || !evict)) {
                break;
            }
            let i = start.wrapping_add(step) & (n - 1);
            let Some((_, state)) = self.table.get_bucket_mut(i) else {
                continue;
            };
            if algorithm.is_full(state, now) {
                return Some((i, Duration::ZERO, 0));
            }
            if evict {
                // A cost-0 check is a peek: it changes nothing.
                let peek = algorithm.check(state, 0, now);
                if best.is_none_or(|(_, reset, _)| peek.reset < reset) {
                    best = Some((i, peek.reset, algorithm.used(state, now)));
                }
            }
            seen += 1;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks `key` (hashed as itself) in `shard`: its state counts checks.
    fn check(shard: &mut Shard<u64, u64>, key: u64, contended: bool) -> u64 {
        let state = shard
            .check_state(key, |(k, _)| *k == key, contended, &Place::default())
            .unwrap();
        *state += 1;
        *state
    }

    fn shard() -> Shard<u64, u64> {
        let mut shard = ShardCell::<u64, u64>::new(0).lock.into_inner();
        for key in [1, 2] {
            shard.insert(key, key, 0, |k| *k);
        }
        shard
    }

    #[test]
    fn uncontended_checks_leave_states_in_their_buckets() {
        let mut shard = shard();
        for n in 1..5 {
            assert_eq!(check(&mut shard, 1, false), n);
        }
        assert!(!shard.hot_live);
    }

    #[test]
    fn the_hot_slot_follows_a_key_contended_twice_in_a_row() {
        let mut shard = shard();
        assert_eq!(check(&mut shard, 1, true), 1);
        assert!(!shard.hot_live);
        assert_eq!(check(&mut shard, 1, true), 2);
        assert!(shard.hot_live);
        assert_eq!(shard.hot_state, 2);
        // Two keys in turn: the hot one stays.
        for round in 1..4 {
            assert_eq!(check(&mut shard, 2, true), round);
            assert_eq!(check(&mut shard, 1, true), 2 + round);
            assert_eq!(shard.hot_state, 2 + round);
        }
        // Key 2 twice in a row: key 1's state goes back to its bucket.
        assert_eq!(check(&mut shard, 2, true), 4);
        assert_eq!(check(&mut shard, 2, true), 5);
        assert_eq!(shard.hot_state, 5);
        // A refund reaches the hot state where it is.
        *shard.refund_state(2, |(k, _)| *k == 2).unwrap() -= 1;
        assert!(shard.hot_live);
        shard.settle();
        let states: Vec<_> = shard.table.iter().map(|&(k, s)| (k, s)).collect();
        assert!(
            states.contains(&(1, 5)) && states.contains(&(2, 4)),
            "{states:?}"
        );
    }

    #[test]
    fn a_check_or_an_insert_writes_one_line_of_its_shard() {
        type Cell = ShardCell<u64, u64>;
        assert_eq!(std::mem::offset_of!(Cell, latest), 0);
        // The lock's word and the shard's data share the mutex: the word
        // takes 8 bytes, first (as measured) or last.
        let lock = std::mem::offset_of!(Cell, lock);
        assert_eq!(lock, 8);
        let word = std::mem::size_of::<ShardLock<Shard<u64, u64>>>()
            - std::mem::size_of::<Shard<u64, u64>>();
        assert_eq!(word, 8);
        // Written by checks and inserts: the table's header, the cursor and
        // the hot state end within the first cache line.
        let data = lock + word;
        assert!(data + std::mem::offset_of!(Shard<u64, u64>, hot_state) + 8 <= 64);
        for written in [
            std::mem::offset_of!(Shard<u64, u64>, cursor),
            std::mem::offset_of!(Shard<u64, u64>, hot_hash),
            std::mem::offset_of!(Shard<u64, u64>, denied_tag),
        ] {
            assert!(written < std::mem::offset_of!(Shard<u64, u64>, hot_state));
        }
        // Read by checks, written rarely: on the next line.
        assert!(data + std::mem::offset_of!(Shard<u64, u64>, last_sweep) >= 64);
        assert!(data + std::mem::offset_of!(Shard<u64, u64>, hot_live) < 128);
        assert_eq!(std::mem::offset_of!(Cell, denied) % 64, 0);
        // The mask of deny slots in use: on the line of the shard's bans,
        // which every check reads.
        let bans = data + std::mem::offset_of!(Shard<u64, u64>, bans);
        assert_eq!(std::mem::offset_of!(Cell, used) / 64, bans / 64);
        // And where the table lies, which every check reads first.
        let place = std::mem::offset_of!(Cell, place);
        assert_eq!(place / 64, bans / 64);
        assert_eq!((place + std::mem::size_of::<Place>() - 1) / 64, bans / 64);
        const { assert!(Shard::<u64, u64>::HOT) };
        const { assert!(!Shard::<u64, u128>::HOT) };
    }

    #[test]
    fn cells_are_an_odd_number_of_128_byte_blocks_long() {
        use crate::{Algorithm, AnyAlgorithm};
        let blocks = [
            std::mem::size_of::<ShardCell<u64, u64>>(),
            std::mem::size_of::<ShardCell<u64, u128>>(),
            std::mem::size_of::<ShardCell<String, <AnyAlgorithm as Algorithm>::State>>(),
        ]
        .map(|size| size / 128);
        assert_eq!(blocks, [9, 9, 9]);
    }

    #[test]
    fn a_shard_whose_bans_are_gone_holds_no_table_of_them() {
        let mut shard = shard();
        shard.bans_mut(4).set(1, 10);
        shard.bans_mut(4).set(2, 20);
        shard.lift_ban(1);
        assert!(shard.bans.is_some(), "key 2 is still banned");
        shard.sweep_bans(19, 1024);
        assert!(shard.bans.is_some(), "key 2's ban runs to 20");
        shard.sweep_bans(20, 1024);
        assert!(shard.bans.is_none());
        shard.bans_mut(4).set(3, 30);
        shard.lift_ban(3);
        assert!(shard.bans.is_none());
        // Nothing to lift or sweep: nothing is made.
        shard.lift_ban(3);
        shard.sweep_bans(40, 1024);
        assert!(shard.bans.is_none());
    }
}
