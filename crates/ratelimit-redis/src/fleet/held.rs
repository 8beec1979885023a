//! What an instance holds of its keys' standing bans and denials, by name,
//! to write back to a Redis that lost its data (see `write_back`).
//!
//! Each entry is a key's name (as in its Redis key names), the instant
//! until which Redis refuses it (the store's local clock, see
//! `Inner::local_now`), the limit that refused it, and whether it is a
//! ban. A ban from Redis records it, and so does any answer of Redis that
//! left the key nothing (until one more unit is back), a ban made through
//! this store or told by another (pub/sub), a settlement in debt. A
//! refund, a settlement or a reset of the key forgets a denial and keeps
//! a ban (a reset of a banned key's count never ends its ban); an unban
//! forgets either. While Redis gives no decisions, the fallback refuses
//! the bans held here (see `held_bans`).
//!
//! Bounded memory: a fixed table of [`HELD_KEYS`] entries, in sets of
//! [`WAYS`]; a new entry takes an empty or ended one of its set, else the
//! one that ends first. A name longer than [`MAX_NAME`] bytes is not
//! kept. Nothing on the request path depends on the number of keys: a
//! record or a look-up is one lock of one set.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How many keys a store holds at most.
pub(crate) const HELD_KEYS: usize = 4_096;

/// The longest name kept, in bytes (a secret key's is 33).
pub(crate) const MAX_NAME: usize = 256;

/// Entries per set.
const WAYS: usize = 4;

#[derive(Default)]
struct Entry {
    /// 0: empty.
    hash: u64,
    name: Box<str>,
    until: u64,
    part: usize,
    banned: bool,
}

/// A key Redis refuses until `until` (the store's local clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Standing {
    pub(crate) name: String,
    pub(crate) until: u64,
    /// Which of the store's limits denied (0 for a ban).
    pub(crate) part: usize,
    pub(crate) banned: bool,
}

/// A bounded table of standing bans and denials, by the name's seeded hash.
pub(crate) struct Held {
    sets: Box<[Mutex<[Entry; WAYS]>]>,
    hasher: RandomState,
}

impl Held {
    /// A table of [`HELD_KEYS`] entries.
    pub(crate) fn new() -> Self {
        Self::with_capacity(HELD_KEYS)
    }

    fn with_capacity(capacity: usize) -> Self {
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        Self {
            sets: (0..sets).map(|_| Mutex::new(Default::default())).collect(),
            hasher: RandomState::new(),
        }
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name).max(1)
    }

    fn set(&self, hash: u64) -> MutexGuard<'_, [Entry; WAYS]> {
        self.sets[hash as usize & (self.sets.len() - 1)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that Redis refuses `name` until `until`, as of `now` (the
    /// latest word on a key replaces the one before).
    pub(crate) fn record(&self, name: &str, now: u64, until: u64, part: usize, banned: bool) {
        if until <= now || name.len() > MAX_NAME {
            return;
        }
        let hash = self.hash(name);
        let mut set = self.set(hash);
        let i = set
            .iter()
            .position(|e| e.hash == hash && *e.name == *name)
            .or_else(|| set.iter().position(|e| e.hash == 0 || e.until <= now))
            .unwrap_or_else(|| (0..WAYS).min_by_key(|&i| set[i].until).unwrap_or(0));
        set[i] = Entry {
            hash,
            name: name.into(),
            until,
            part,
            banned,
        };
    }

    /// Forgets `name`, banned or denied (an unban).
    pub(crate) fn forget(&self, name: &str) {
        self.forget_if(name, |_| true);
    }

    /// Forgets `name`'s denial, and keeps its ban (a refund, a
    /// settlement, a reset: none lifts a ban).
    pub(crate) fn forget_denial(&self, name: &str) {
        self.forget_if(name, |e| !e.banned);
    }

    fn forget_if(&self, name: &str, which: impl Fn(&Entry) -> bool) {
        let hash = self.hash(name);
        for e in self.set(hash).iter_mut() {
            if e.hash == hash && *e.name == *name && which(e) {
                *e = Entry::default();
            }
        }
    }

    /// The instant `name`'s ban held here ends, if it stands at `now`.
    pub(crate) fn ban_until(&self, name: &str, now: u64) -> Option<u64> {
        let hash = self.hash(name);
        self.set(hash)
            .iter()
            .find(|e| e.hash == hash && *e.name == *name && e.banned && now < e.until)
            .map(|e| e.until)
    }

    /// Whether `name` is held at `now`.
    pub(crate) fn holds(&self, name: &str, now: u64) -> bool {
        let hash = self.hash(name);
        self.set(hash)
            .iter()
            .any(|e| e.hash == hash && *e.name == *name && now < e.until)
    }

    /// Every key held at `now` (at most [`HELD_KEYS`]; off the request
    /// path).
    pub(crate) fn standing(&self, now: u64) -> Vec<Standing> {
        let mut out = Vec::new();
        for set in self.sets.iter() {
            let set = set.lock().unwrap_or_else(PoisonError::into_inner);
            out.extend(
                set.iter()
                    .filter(|e| e.hash != 0 && now < e.until)
                    .map(|e| Standing {
                        name: e.name.to_string(),
                        until: e.until,
                        part: e.part,
                        banned: e.banned,
                    }),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_replace_forget_and_end() {
        let h = Held::with_capacity(8);
        h.record("a", 0, 100, 1, false);
        h.record("b", 0, 50, 0, true);
        h.record("a", 10, 200, 0, true);
        let mut s = h.standing(60);
        s.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(
            s,
            [Standing {
                name: "a".into(),
                until: 200,
                part: 0,
                banned: true
            }]
        );
        assert!(h.holds("a", 199) && !h.holds("a", 200) && !h.holds("c", 0));
        assert_eq!(h.ban_until("a", 60), Some(200));
        // A reset keeps a ban; an unban lifts it.
        h.forget_denial("a");
        assert!(h.holds("a", 60));
        h.forget("a");
        assert!(h.standing(0).iter().all(|e| e.name == "b"));
        // Ended at once, or a name too long: not kept.
        h.record("c", 5, 5, 0, false);
        h.record(&"x".repeat(MAX_NAME + 1), 0, 9, 0, false);
        assert_eq!(h.standing(0).len(), 1);
    }

    #[test]
    fn a_denial_is_forgotten_and_is_no_ban() {
        let h = Held::with_capacity(8);
        h.record("d", 0, 100, 1, false);
        assert_eq!(h.ban_until("d", 0), None);
        h.forget_denial("d");
        assert!(!h.holds("d", 0));
    }

    #[test]
    fn memory_is_bounded() {
        let h = Held::with_capacity(100);
        for i in 0..10_000u64 {
            h.record(&format!("key-{i}"), 0, 1_000 + i, 0, false);
        }
        let n = h.standing(0).len();
        assert!((64..=128).contains(&n), "{n}");
        // The entry ending first made room for the latest.
        assert!(h.holds("key-9999", 0));
    }
}
