//! A read-only fast path for keys that are already denied.
//!
//! When a check of cost 1 is denied, nothing in the key's state changes
//! until the instant `until = now + wait` at which a cost-1 request is
//! admitted again: only admitted cost moves a state, and no cost can be
//! admitted before that instant. When the key is denied again (a hot key:
//! see `Shard::denied_again`), the store writes `(hash, until,
//! reset_at)` into a small per-shard slot array; later cost-1 checks of the
//! same key read it and answer the same denial without taking the shard's
//! lock, so a flood from one client on every core reads shared cache lines
//! and writes none.
//!
//! Each slot is a sequence lock over atomics: the shard's lock serialises
//! writers (a slot belongs to one shard), readers retry nothing and simply
//! fall back to the locked path when they see a write in progress.
//!
//! Which slots hold a denial is kept in a bit mask ([`InUse`]) beside the
//! shard's lock, on a line every check of the shard reads anyway: a check
//! of a key whose slot is empty (every check of a shard with no hot key)
//! reads no slot, so the slots' lines take no room in its cache.

use crate::Decision;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Slots per shard (a power of two), indexed by the key's hash.
pub(super) const SLOTS: usize = 16;

/// How long a remembered denial keeps its slot against other keys' (ns).
const DISPLACE_AFTER: u64 = 1_000_000;

#[derive(Default)]
struct Slot {
    /// Even when stable, odd while being written.
    seq: AtomicU64,
    hash: AtomicU64,
    until: AtomicU64,
    reset_at: AtomicU64,
    /// 1 for a ban's denial, else 0.
    banned: AtomicU64,
    /// When the entry was written (the caller's clock).
    written_at: AtomicU64,
}

/// One shard's slots, on cache lines of their own.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct DenySlots([Slot; SLOTS]);

/// Which of a shard's slots may hold a denial: bit `i` for slot `i`, set
/// when a denial is written there and cleared when it is forgotten, so a
/// clear bit means the slot holds nothing. Written only when a bit
/// changes; a reader that sees a stale bit only reads a slot it need not
/// have, or takes the lock when a slot would have answered: the answer is
/// the same.
#[derive(Default)]
pub(super) struct InUse(AtomicU32);

const _: () = assert!(SLOTS <= 32);

impl InUse {
    /// Whether slot `i` may hold a denial.
    #[inline]
    fn holds(&self, i: usize) -> bool {
        self.0.load(Ordering::Relaxed) & (1 << i) != 0
    }

    /// Marks slot `i` as holding a denial or not, writing only a change.
    #[inline]
    fn mark(&self, i: usize, held: bool) {
        let bit = 1 << i;
        if (self.0.load(Ordering::Relaxed) & bit != 0) != held {
            if held {
                self.0.fetch_or(bit, Ordering::Relaxed);
            } else {
                self.0.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }
}

/// What a remembered denial needs besides its times: the algorithm's
/// constant fields.
#[derive(Clone, Copy)]
pub(super) struct Constants {
    pub(super) limit: u64,
    pub(super) window: Duration,
}

/// The slot index of the key hashed `hash`.
#[inline]
fn index(hash: u64) -> usize {
    hash as usize & (SLOTS - 1)
}

impl DenySlots {
    #[inline]
    fn slot(&self, hash: u64) -> &Slot {
        &self.0[index(hash)]
    }

    /// The denial of a cost-1 check of the key hashed `hash` at `now` (or
    /// at `latest`, the shard's latest time, if later), if one is
    /// remembered and still stands; `used`: the shard's mask of slots in
    /// use, read first.
    #[inline]
    pub(super) fn denied(
        &self,
        used: &InUse,
        hash: u64,
        now: u64,
        latest: &AtomicU64,
        c: Constants,
    ) -> Option<Decision> {
        if !used.holds(index(hash)) {
            return None;
        }
        let slot = self.slot(hash);
        let seq = slot.seq.load(Ordering::Acquire);
        if slot.hash.load(Ordering::Relaxed) != hash {
            return None;
        }
        let until = slot.until.load(Ordering::Relaxed);
        let reset_at = slot.reset_at.load(Ordering::Relaxed);
        let banned = slot.banned.load(Ordering::Relaxed) == 1;
        fence(Ordering::Acquire);
        if seq & 1 == 1 || slot.seq.load(Ordering::Relaxed) != seq {
            return None;
        }
        // Read only on a hit: it shares a cache line with the shard's lock.
        let now = now.max(latest.load(Ordering::Relaxed));
        if now >= until {
            return None;
        }
        let wait = Duration::from_nanos(until - now);
        let reset = Duration::from_nanos(reset_at.saturating_sub(now));
        Some(Decision {
            banned,
            ..Decision::denied(c.limit, c.window, reset, wait)
        })
    }

    /// Remembers `decision`, a denial of a cost-1 check at `now`. The
    /// caller holds the shard's lock.
    #[inline]
    pub(super) fn remember(
        &self,
        used: &InUse,
        hash: u64,
        now: u64,
        wait: Option<Duration>,
        reset: Duration,
        banned: bool,
    ) {
        let slot = self.slot(hash);
        let held = slot.hash.load(Ordering::Relaxed);
        if held != hash
            && held != 0
            && now.saturating_sub(slot.written_at.load(Ordering::Relaxed)) < DISPLACE_AFTER
            && now < slot.until.load(Ordering::Relaxed)
        {
            // Another key's denial was remembered less than a millisecond
            // ago and still stands: leave it. A flood of distinct denied
            // keys then writes each slot at most once a millisecond (and
            // the readers' cache lines stay shared), while a hot key takes
            // a slot within a millisecond.
            return;
        }
        // Instants past the end of u64 time (wide states) are not kept.
        let at = |d: Duration| u64::try_from(d.as_nanos()).ok()?.checked_add(now);
        let (Some(until), Some(reset_at)) = (wait.and_then(at), at(reset)) else {
            return;
        };
        self.write(used, index(hash), hash, until, reset_at, banned);
        slot.written_at.store(now, Ordering::Relaxed);
    }

    /// Forgets the key hashed `hash` (its state changed other than by an
    /// admission: a refund, an eviction). The caller holds the shard's lock.
    #[inline]
    pub(super) fn forget(&self, used: &InUse, hash: u64) {
        if used.holds(index(hash)) && self.slot(hash).hash.load(Ordering::Relaxed) == hash {
            self.write(used, index(hash), 0, 0, 0, false);
        }
    }

    /// Forgets every key. The caller holds the shard's lock.
    pub(super) fn clear(&self, used: &InUse) {
        for i in 0..SLOTS {
            self.write(used, i, 0, 0, 0, false);
        }
    }

    /// Writes slot `i` (`hash` 0: empty) and its bit in `used`.
    fn write(&self, used: &InUse, i: usize, hash: u64, until: u64, reset_at: u64, banned: bool) {
        let slot = &self.0[i];
        let seq = slot.seq.load(Ordering::Relaxed);
        slot.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        slot.hash.store(hash, Ordering::Relaxed);
        slot.until.store(until, Ordering::Relaxed);
        slot.reset_at.store(reset_at, Ordering::Relaxed);
        slot.banned.store(u64::from(banned), Ordering::Relaxed);
        slot.seq.store(seq.wrapping_add(2), Ordering::Release);
        used.mark(i, hash != 0);
    }
}
