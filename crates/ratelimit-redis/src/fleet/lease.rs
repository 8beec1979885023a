//! Local leases: `n` units of a key taken from Redis at once (one check of
//! cost `n`), spent here one request at a time, the rest given back when
//! the lease expires.
//!
//! Only hot keys take leases: a key's first cost-1 check leaves a marker
//! (an entry with no units) for `ttl`, and a check that finds the marker
//! takes the lease. A flood of distinct keys thus costs no units.
//!
//! A fixed table like the deny cache's: at most `capacity` entries, in
//! sets of [`WAYS`]; a new entry takes this key's, an empty or expired
//! one, else a marker, else the lease expiring first, whose unspent units
//! the store gives back.
//!
//! A forgotten key (a reset, a ban, here or told by another instance)
//! bumps its set's count of forgets: a lease taken by a check that was in
//! flight then (its units read from Redis before the change) is not
//! recorded, so no lease outlives a ban it raced with.

use ratelimit_core::{saturating_nanos, Decision};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Entries per set.
const WAYS: usize = 4;

/// A lease's unspent units, to give back to Redis.
pub(crate) struct Unspent {
    pub(crate) key: String,
    pub(crate) units: u64,
    /// The caller's time of the check that took the lease (the refund's
    /// `admitted_at`).
    pub(crate) taken_at: u64,
    /// The local clock's time of the take.
    pub(crate) taken_local: u64,
}

#[derive(Default)]
struct Lease {
    /// 0: empty.
    hash: u64,
    key: String,
    left: u64,
    taken_at: u64,
    /// Local time at which the lease ends.
    expires: u64,
    /// Local time of the take.
    taken_local: u64,
    /// Redis's `remaining` and reset instant (local time) when taken, and
    /// the decision's limit and window.
    remaining: u64,
    reset_at: u64,
    /// When one more unit is available in Redis (local time), for a
    /// lease taken with nothing left beside it.
    next_at: u64,
    limit: u64,
    window: Duration,
}

/// The decision of a request spent from a lease: admitted, with Redis's
/// `remaining` when the lease was taken plus the lease's units still
/// unspent, and the reset counted down.
fn spent(lease: &Lease, now: u64) -> Decision {
    let remaining = lease.remaining + lease.left;
    let next = if remaining > 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos(lease.next_at.saturating_sub(now))
    };
    Decision::new(
        true,
        remaining,
        Some(Duration::ZERO),
        lease.limit,
        lease.window,
        Duration::from_nanos(lease.reset_at.saturating_sub(now)),
        next,
    )
}

/// The leases of one store.
pub(crate) struct Leases {
    sets: Box<[Mutex<[Lease; WAYS]>]>,
    /// Per set: how many times a key of it was forgotten, changed under
    /// the set's lock.
    forgets: Box<[AtomicU64]>,
    hasher: RandomState,
    /// Units per lease.
    pub(crate) size: u64,
    /// How long a lease lasts, in ns of the local clock.
    pub(crate) ttl: u64,
}

impl Leases {
    pub(crate) fn new(capacity: usize, size: u64, ttl: Duration) -> Self {
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        Self {
            sets: (0..sets).map(|_| Mutex::new(Default::default())).collect(),
            forgets: (0..sets).map(|_| AtomicU64::new(0)).collect(),
            hasher: RandomState::new(),
            size,
            ttl: saturating_nanos(ttl),
        }
    }

    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key).max(1)
    }

    fn index(&self, hash: u64) -> usize {
        hash as usize & (self.sets.len() - 1)
    }

    fn set(&self, hash: u64) -> MutexGuard<'_, [Lease; WAYS]> {
        self.sets[self.index(hash)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The count of forgets of `key`'s set, read before a lease of it is
    /// taken from Redis (see [`insert`](Self::insert)).
    pub(crate) fn forgets(&self, key: &str) -> u64 {
        self.forgets[self.index(self.hash(key))].load(Ordering::Acquire)
    }

    /// Spends one unit of `key`'s lease at local time `now`, if it has one
    /// left and has not expired: `Spend::Spent`. Otherwise whether the key
    /// is hot (checked within `ttl` before), and the unspent units of its
    /// expired lease, if any, for refunding. A key seen for the first time
    /// is marked.
    pub(crate) fn spend(&self, key: &str, now: u64) -> (Spend, Option<Unspent>) {
        let hash = self.hash(key);
        let mut set = self.set(hash);
        let Some(lease) = set.iter_mut().find(|l| l.hash == hash && l.key == key) else {
            let marker = Lease {
                hash,
                key: key.to_owned(),
                expires: now.saturating_add(self.ttl),
                ..Lease::default()
            };
            let gone = place(&mut set, hash, key, now, marker);
            return (Spend::Cold, gone);
        };
        if now >= lease.expires {
            let gone = take(lease);
            // Seen again after its lease: still hot.
            return (Spend::Hot, gone);
        }
        if lease.left == 0 {
            return (Spend::Hot, None);
        }
        lease.left -= 1;
        let spent = spent(lease, now);
        (Spend::Spent(spent), None)
    }

    /// Records a lease of `key` with `left` units unspent, taken at the
    /// caller's `taken_at` and local `now`, with Redis's decision `d`,
    /// unless a key of its set was forgotten since `forgets` was read
    /// ([`forgets`](Self::forgets), before the take): then `Err`, and the
    /// units are dropped as a forgotten lease's are. Returns the unspent
    /// units of a lease it replaces (this key's, or the one expiring first
    /// when the set is full).
    pub(crate) fn insert(
        &self,
        key: &str,
        (left, forgets): (u64, u64),
        taken_at: u64,
        now: u64,
        d: &Decision,
    ) -> Result<Option<Unspent>, Forgotten> {
        let hash = self.hash(key);
        let mut set = self.set(hash);
        if self.forgets[self.index(hash)].load(Ordering::Acquire) != forgets {
            return Err(Forgotten);
        }
        let lease = Lease {
            hash,
            key: key.to_owned(),
            left,
            taken_at,
            taken_local: now,
            expires: now.saturating_add(self.ttl),
            remaining: d.remaining,
            reset_at: saturating_nanos(d.reset).saturating_add(now),
            next_at: saturating_nanos(d.next).saturating_add(now),
            limit: d.limit,
            window: d.window,
        };
        Ok(place(&mut set, hash, key, now, lease))
    }

    /// Takes `key`'s lease out, returning its unspent units to give back
    /// (a settlement: the key's next checks must see Redis's state, a debt
    /// included). The key is cold again.
    pub(crate) fn take_key(&self, key: &str) -> Option<Unspent> {
        let hash = self.hash(key);
        let mut set = self.set(hash);
        let lease = set.iter_mut().find(|l| l.hash == hash && l.key == key)?;
        take(lease)
    }

    /// Drops `key`'s lease, its unspent units with it (a reset deleted the
    /// state they were taken from).
    /// Counts a forget in its set, so that a take in flight records no
    /// lease.
    pub(crate) fn forget(&self, key: &str) {
        let hash = self.hash(key);
        let mut set = self.set(hash);
        self.forgets[self.index(hash)].fetch_add(1, Ordering::AcqRel);
        for lease in set.iter_mut().filter(|l| l.hash == hash && l.key == key) {
            *lease = Lease::default();
        }
    }

    /// Removes the leases expired at local time `now` (every lease with
    /// `now == u64::MAX`), returning their unspent units. Walks the whole
    /// table: upkeep, never on the request path.
    pub(crate) fn drain_expired(&self, now: u64) -> Vec<Unspent> {
        let mut out = Vec::new();
        for set in &*self.sets {
            let mut set = set.lock().unwrap_or_else(PoisonError::into_inner);
            for lease in set.iter_mut().filter(|l| l.hash != 0 && now >= l.expires) {
                out.extend(take(lease));
            }
        }
        out
    }
}

/// A lease not recorded: its set had a key forgotten while it was taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Forgotten;

/// Whether a check was served from a lease.
pub(crate) enum Spend {
    /// Served: the decision.
    Spent(Decision),
    /// Not served; the key was checked within `ttl` before: take a lease.
    Hot,
    /// Not served; the key's first check in `ttl` (now marked).
    Cold,
}

/// Puts `new` in `set`: in this key's entry, else an empty or expired one,
/// else a marker, else the lease expiring first. Returns the unspent units
/// of the lease it replaces.
fn place(set: &mut [Lease; WAYS], hash: u64, key: &str, now: u64, new: Lease) -> Option<Unspent> {
    let i = set
        .iter()
        .position(|l| l.hash == hash && l.key == key)
        .or_else(|| set.iter().position(|l| l.hash == 0 || now >= l.expires))
        .or_else(|| {
            (0..WAYS)
                .filter(|&i| set[i].left == 0)
                .min_by_key(|&i| set[i].expires)
        })
        .unwrap_or_else(|| (0..WAYS).min_by_key(|&i| set[i].expires).unwrap_or(0));
    let old = take(&mut set[i]);
    set[i] = new;
    old
}

/// Empties `lease`, returning its unspent units if any.
fn take(lease: &mut Lease) -> Option<Unspent> {
    let old = std::mem::take(lease);
    (old.hash != 0 && old.left > 0).then_some(Unspent {
        key: old.key,
        units: old.left,
        taken_at: old.taken_at,
        taken_local: old.taken_local,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted() -> Decision {
        Decision::new(
            true,
            5,
            Some(Duration::ZERO),
            10,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Duration::ZERO,
        )
    }

    #[test]
    fn a_take_in_flight_across_a_forget_records_no_lease() {
        let leases = Leases::new(16, 4, Duration::from_secs(1));
        let before = leases.forgets("k");
        // A reset or ban of the key while the take was in Redis.
        leases.forget("k");
        assert_eq!(
            leases.insert("k", (3, before), 0, 0, &admitted()).err(),
            Some(Forgotten)
        );
        assert!(matches!(leases.spend("k", 1).0, Spend::Cold));
        // A take started after the forget is recorded.
        let after = leases.forgets("k");
        assert!(leases.insert("k", (3, after), 0, 0, &admitted()).is_ok());
        assert!(matches!(leases.spend("k", 1).0, Spend::Spent(_)));
        // Forgetting drops it, its units with it.
        leases.forget("k");
        assert!(matches!(leases.spend("k", 2).0, Spend::Cold));
    }
}
