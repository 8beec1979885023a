//! The local deny cache: keys that Redis denied, answered here until their
//! wait runs out.
//!
//! When Redis denies a cost-1 check of key K with wait `w`, nothing this
//! instance can do admits K before `w` has passed: only admitted cost
//! moves a state, and no cost-1 request is admitted before `now + w`
//! (ALGORITHMS.md: "still denied at any earlier time"). The store keeps
//! `(hash of K, until, reset_at)` here and answers further cost-1 checks of
//! K from it, without a round trip, with the decision Redis would give:
//! denied, `remaining` 0, `wait = until - now`, `reset = reset_at - now`.
//!
//! A denial is answered here for at most [`MAX_AGE`] (1 s), then Redis is
//! asked again: what another instance did meanwhile (a refund; a reset or
//! an unban whose pub/sub message was missed, see `invalidation`) is seen
//! within that long.
//!
//! A denial is remembered only if nothing forgot its key between the
//! check's sending and its answer: a check takes a [`Ticket`] (its set's
//! count of forgets) before the round trip, and `remember` keeps the
//! denial only while that count is unchanged. So a refund, settlement,
//! reset or unban made here, which forgets the key before its own round
//! trip and again after it, is never undone by a check that was in
//! flight: its denial, decided before the give-back, is dropped. A
//! forget of another key of the same set drops it too (it only costs a
//! round trip).
//!
//! Bounded memory: a fixed table of `capacity` entries (rounded up to a
//! power of two), in sets of [`WAYS`], allocated when the store is built.
//! A new denial takes an empty or expired entry of its set, else the one
//! that expires first. Nothing on the request path depends on the number
//! of keys. Keys are told apart by a 64-bit hash seeded at random per
//! store, so a client cannot choose a key that answers for another's.

use ratelimit_core::Decision;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Entries per set.
pub(crate) const WAYS: usize = 4;

/// How long a denial is answered here before Redis is asked again (ns):
/// a reset, an unban or a refund made through another instance is seen
/// here within this long. A key denied without end costs one round trip
/// per instance this often.
pub(crate) const MAX_AGE: u64 = 1_000_000_000;

#[derive(Clone, Copy, Default)]
struct Entry {
    /// 0: empty.
    hash: u64,
    until: u64,
    reset_at: u64,
    /// Which of the store's limits denied.
    part: usize,
    /// A ban's denial.
    banned: bool,
    /// When Redis gave it (the store's local clock).
    at: u64,
}

/// One set of entries, and how many forgets it has seen.
#[derive(Default)]
struct Set {
    entries: [Entry; WAYS],
    forgets: u64,
}

/// Taken before a check's round trip: its key's hash and its set's count
/// of forgets then (see the module docs).
#[derive(Clone, Copy)]
pub(crate) struct Ticket {
    hash: u64,
    forgets: u64,
}

/// A bounded table of standing denials, keyed by the rendered key's
/// seeded hash. Times are nanoseconds on the store's local clock (see
/// `Inner::local_now`).
pub(crate) struct DenyCache {
    sets: Box<[Mutex<Set>]>,
    hasher: RandomState,
}

impl DenyCache {
    /// A cache of at least `capacity` entries (`capacity >= 1`).
    pub(crate) fn new(capacity: usize) -> Self {
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        Self {
            sets: (0..sets).map(|_| Mutex::new(Set::default())).collect(),
            hasher: RandomState::new(),
        }
    }

    /// How many entries the table holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key).max(1)
    }

    fn set(&self, hash: u64) -> std::sync::MutexGuard<'_, Set> {
        // The low bits pick the set; the whole hash tells keys apart.
        self.sets[hash as usize & (self.sets.len() - 1)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The standing denial of `key` at `now`, if any, as the decision of a
    /// cost-1 check (`constants(i)` are the `limit` and `window` of the
    /// store's limit `i`).
    pub(crate) fn denied(
        &self,
        key: &str,
        now: u64,
        constants: impl FnOnce(usize) -> (u64, Duration),
    ) -> Option<Decision> {
        let hash = self.hash(key);
        let e = *self.set(hash).entries.iter().find(|e| e.hash == hash)?;
        if now >= e.until || now.saturating_sub(e.at) >= MAX_AGE {
            return None;
        }
        let (limit, window) = constants(e.part);
        // A cost-1 denial: the wait is also the wait for one more unit.
        let wait = Duration::from_nanos(e.until - now);
        if e.banned {
            return Some(Decision::ban(limit, window, wait));
        }
        let reset = Duration::from_nanos(e.reset_at.saturating_sub(now));
        Some(Decision::denied(limit, window, reset, wait))
    }

    /// The ticket of a check of `key` about to be sent.
    pub(crate) fn ticket(&self, key: &str) -> Ticket {
        let hash = self.hash(key);
        let forgets = self.set(hash).forgets;
        Ticket { hash, forgets }
    }

    /// Remembers `decision`, Redis's denial of a cost-1 check by the
    /// store's limit `part`, made no earlier than `now`, of the key whose
    /// check took `ticket`: unless the key's set was forgotten since. A
    /// denial that can never be admitted (no wait) or that ends at once
    /// is not kept.
    pub(crate) fn remember(&self, ticket: Ticket, now: u64, decision: &Decision, part: usize) {
        let at = |d: Duration| u64::try_from(d.as_nanos()).ok()?.checked_add(now);
        let (Some(until), Some(reset_at)) = (decision.wait.and_then(at), at(decision.reset)) else {
            return;
        };
        if decision.allowed || until <= now {
            return;
        }
        let hash = ticket.hash;
        let mut set = self.set(hash);
        if set.forgets != ticket.forgets {
            return;
        }
        let entries = &mut set.entries;
        let i = entries
            .iter()
            .position(|e| e.hash == hash)
            .or_else(|| entries.iter().position(|e| e.hash == 0 || e.until <= now))
            .unwrap_or_else(|| {
                // Full of standing denials: the one ending first goes.
                (0..WAYS).min_by_key(|&i| entries[i].until).unwrap_or(0)
            });
        entries[i] = Entry {
            hash,
            until,
            reset_at,
            part,
            banned: decision.banned,
            at: now,
        };
    }

    /// Forgets `key` (cost was given back), and drops the denials of
    /// checks of its set in flight (see [`Ticket`]).
    pub(crate) fn forget(&self, key: &str) {
        let hash = self.hash(key);
        let mut set = self.set(hash);
        set.forgets = set.forgets.wrapping_add(1);
        for e in set.entries.iter_mut().filter(|e| e.hash == hash) {
            *e = Entry::default();
        }
    }

    /// How many entries hold a denial standing at `now` (tests).
    #[cfg(test)]
    fn standing(&self, now: u64) -> usize {
        self.sets
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap()
                    .entries
                    .iter()
                    .filter(|e| e.hash != 0 && now < e.until)
                    .count()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(wait_ns: u64, reset_ns: u64) -> Decision {
        let wait = Duration::from_nanos(wait_ns);
        Decision::new(
            false,
            0,
            Some(wait),
            3,
            Duration::from_secs(1),
            Duration::from_nanos(reset_ns),
            wait,
        )
    }

    #[test]
    fn a_denial_stands_until_its_wait_runs_out() {
        let c = DenyCache::new(8);
        c.remember(c.ticket("k"), 1_000, &denial(500, 900), 0);
        let d = c
            .denied("k", 1_200, |_| (3, Duration::from_secs(1)))
            .unwrap();
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.wait, Some(Duration::from_nanos(300)));
        assert_eq!(d.reset, Duration::from_nanos(700));
        assert!(c
            .denied("k", 1_499, |_| (3, Duration::from_secs(1)))
            .is_some());
        assert!(c
            .denied("k", 1_500, |_| (3, Duration::from_secs(1)))
            .is_none());
        assert!(c
            .denied("other", 1_200, |_| (3, Duration::from_secs(1)))
            .is_none());
        c.forget("k");
        assert!(c
            .denied("k", 1_200, |_| (3, Duration::from_secs(1)))
            .is_none());
    }

    #[test]
    fn a_denial_decided_before_a_forget_is_not_kept() {
        let c = DenyCache::new(8);
        let in_flight = c.ticket("k");
        c.forget("k");
        c.remember(in_flight, 0, &denial(500, 900), 0);
        assert!(c.denied("k", 0, |_| (3, Duration::from_secs(1))).is_none());
        // A check sent after the forget is remembered.
        c.remember(c.ticket("k"), 0, &denial(500, 900), 0);
        assert!(c.denied("k", 0, |_| (3, Duration::from_secs(1))).is_some());
    }

    #[test]
    fn never_and_admitted_are_not_kept() {
        let c = DenyCache::new(8);
        let mut never = denial(0, 0);
        never.wait = None;
        c.remember(c.ticket("a"), 0, &never, 0);
        c.remember(c.ticket("b"), 0, &denial(0, 10), 0);
        let mut admitted = denial(10, 10);
        admitted.allowed = true;
        c.remember(c.ticket("c"), 0, &admitted, 0);
        assert_eq!(c.standing(0), 0);
    }

    #[test]
    fn memory_is_bounded_and_evicts_at_its_cap() {
        let c = DenyCache::new(100);
        let cap = c.capacity();
        assert_eq!(cap, 128);
        for i in 0..10_000u64 {
            c.remember(
                c.ticket(&format!("key-{i}")),
                0,
                &denial(1_000 + i, 1_000),
                0,
            );
        }
        assert!(c.standing(0) <= cap);
        assert!(c.standing(0) >= cap / 2, "{}", c.standing(0));
        // The latest key is kept: the entry ending first made room for it.
        assert!(c
            .denied("key-9999", 0, |_| (3, Duration::from_secs(1)))
            .is_some());
        // Expired entries are reused first.
        assert_eq!(c.standing(1_000_000), 0);
    }
}
