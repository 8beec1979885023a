//! Which keys were evicted lately: their fingerprints, in generations
//! that age, so that a key never evicted reads as new under a flood.
//!
//! Each eviction writes the key's 16-bit fingerprint into the newest
//! generation, an open-addressed table of fingerprints (linear probing,
//! at most 5/8 full) that keeps the latest instant at which any key
//! written into it would be full again. A generation whose instant has
//! passed is dropped whole. A full generation is followed by
//! a new one as large as all live ones together (a power of two), so a
//! flood's evictions within a period fit in a few tables, up to a bound
//! in slots per key of the shard's cap. Past that bound, or past
//! [`MAX_GENERATIONS`], an eviction is not written; the set then
//! answers "maybe" for every key until that eviction's key would be full.
//!
//! The set never forgets a key it should hold: a key evicted at `now`,
//! full again at `until`, was either written into a generation whose
//! instant is at least `until`, or moved the overflow's instant to at
//! least `until`; either way [`EvictedKeys::may_hold`] answers true for
//! it before `until`. A key never evicted is answered true only when a
//! live generation's probe meets its fingerprint, or during an overflow.

/// Slots (2 bytes each) a shard's generations may hold in all, per key of
/// the shard's cap.
pub(super) const SLOTS_PER_KEY: usize = 128;

/// Live generations at most: a lookup probes each of them.
const MAX_GENERATIONS: usize = 16;

/// The smallest generation, in slots.
const MIN_SLOTS: usize = 64;

/// One table of fingerprints (0: an empty slot).
#[derive(Debug)]
struct Generation {
    slots: Box<[u16]>,
    bits: u32,
    len: usize,
    /// When every key written into it would be full again (ns of the
    /// store's clock).
    until: u64,
}

impl Generation {
    /// An empty table of `slots` (a power of two, at least [`MIN_SLOTS`]).
    fn new(slots: usize) -> Self {
        Self {
            slots: vec![0; slots].into_boxed_slice(),
            bits: slots.trailing_zeros(),
            len: 0,
            until: 0,
        }
    }

    /// Whether it takes another fingerprint: it stays at most 5/8 full,
    /// so a probe always ends at an empty slot, and a key not in it
    /// meets few fingerprints on its way there.
    fn has_room(&self) -> bool {
        self.len < self.slots.len() / 8 * 5
    }

    /// The slot holding the key's fingerprint (`Ok`), or the empty slot
    /// where its probe ends (`Err`).
    fn find(&self, key: Mixed) -> Result<usize, usize> {
        let mut i = (key.0 >> (64 - self.bits)) as usize;
        let mask = self.slots.len() - 1;
        loop {
            match self.slots[i] {
                0 => return Err(i),
                f if f == key.fingerprint() => return Ok(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Writes the key's fingerprint (if the table has room) and `until`.
    fn insert(&mut self, key: Mixed, until: u64) {
        if let Err(i) = self.find(key) {
            self.slots[i] = key.fingerprint();
            self.len += 1;
        }
        self.until = self.until.max(until);
    }
}

/// A key's hash, mixed again: a generation's table takes its first slot
/// from the top bits and the fingerprint from the low 16, which must not
/// go together for keys the store's hasher maps alike (as sequential
/// integers are).
#[derive(Clone, Copy)]
struct Mixed(u64);

impl Mixed {
    /// The finalizer of SplitMix64: every bit of the hash moves every bit.
    fn new(hash: u64) -> Self {
        let z = (hash ^ (hash >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self(z ^ (z >> 31))
    }

    /// The key's fingerprint, never 0 (an empty slot).
    fn fingerprint(self) -> u16 {
        (self.0 as u16).max(1)
    }
}

/// The fingerprints of the keys a shard evicted, by generation (oldest
/// first), and the overflow.
#[derive(Debug)]
pub(super) struct EvictedKeys {
    generations: Vec<Generation>,
    /// Slots of the live generations.
    slots: usize,
    max_slots: usize,
    min_slots: usize,
    /// Until when an eviction that was not written could come back.
    overflow_until: u64,
    /// No generation expires before this (at most the least `until`), so
    /// that most calls of [`expire`](Self::expire) compare only this.
    expires_at: u64,
}

impl EvictedKeys {
    /// An empty set for a shard of `keys` keys at its cap: generations of
    /// at least `keys` slots, and at most [`SLOTS_PER_KEY`] per key in all.
    pub(super) fn new(keys: usize) -> Self {
        let min_slots = keys.next_power_of_two().max(MIN_SLOTS);
        Self {
            generations: Vec::new(),
            slots: 0,
            max_slots: keys.saturating_mul(SLOTS_PER_KEY).max(2 * min_slots),
            min_slots,
            overflow_until: 0,
            expires_at: u64::MAX,
        }
    }

    /// Records that the key hashed `hash`, evicted at `now`, would be full
    /// at `until`.
    pub(super) fn record(&mut self, hash: u64, until: u64, now: u64) {
        self.expire(now);
        match self.writable() {
            Some(generation) => {
                generation.insert(Mixed::new(hash), until);
                // A generation's `until` only grows, and a new one's is
                // this: the bound stays at most the least of them.
                self.expires_at = self.expires_at.min(until);
            }
            None => self.overflow_until = self.overflow_until.max(until),
        }
    }

    /// Whether the key hashed `hash` may have been evicted and not be full
    /// yet at `now`: always true for one that was.
    pub(super) fn may_hold(&self, hash: u64, now: u64) -> bool {
        let key = Mixed::new(hash);
        self.overflow_until > now
            || self
                .generations
                .iter()
                .any(|g| g.until > now && g.find(key).is_ok())
    }

    /// Drops the generations whose keys are all full at `now`.
    pub(super) fn expire(&mut self, now: u64) {
        if now < self.expires_at {
            return;
        }
        self.generations.retain(|g| g.until > now);
        self.slots = self.generations.iter().map(|g| g.slots.len()).sum();
        let least = self.generations.iter().map(|g| g.until).min();
        self.expires_at = least.unwrap_or(u64::MAX);
    }

    /// The generation to write into: the newest, or a new one when that is
    /// full; `None` past the bounds.
    fn writable(&mut self) -> Option<&mut Generation> {
        if self.generations.last().is_none_or(|g| !g.has_room()) {
            let size = self.next_size()?;
            self.slots += size;
            self.generations.push(Generation::new(size));
        }
        self.generations.last_mut()
    }

    /// The size of a new generation: as large as the live ones together,
    /// or as large as fits under the bound, if that is at least the
    /// smallest.
    fn next_size(&self) -> Option<usize> {
        if self.generations.len() == MAX_GENERATIONS {
            return None;
        }
        let want = self.slots.max(self.min_slots).next_power_of_two();
        let room = self.max_slots - self.slots;
        let size = if want <= room {
            want
        } else {
            1 << room.checked_ilog2()?
        };
        (size >= self.min_slots).then_some(size)
    }

    /// Bytes of fingerprints held (for tests of the bound).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.slots * std::mem::size_of::<u16>()
    }
}

#[cfg(test)]
mod tests {
    use super::{EvictedKeys, MAX_GENERATIONS, SLOTS_PER_KEY};

    fn hash(i: u64) -> u64 {
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7)
    }

    #[test]
    fn every_recorded_key_is_held_until_it_would_be_full() {
        let mut keys = EvictedKeys::new(16);
        for i in 0..1_000 {
            keys.record(hash(i), 1_000 + i, i);
        }
        for i in 0..1_000 {
            assert!(keys.may_hold(hash(i), 999 + i), "key {i}");
        }
        // Within the bound: few keys never evicted read as held.
        let strangers = (1_000..101_000)
            .filter(|&i| keys.may_hold(hash(i), 1_000))
            .count();
        assert!(strangers < 100, "{strangers}");
    }

    #[test]
    fn generations_age_and_their_memory_goes() {
        let mut keys = EvictedKeys::new(16);
        for i in 0..500 {
            keys.record(hash(i), 100, 0);
        }
        let early = keys.bytes();
        for i in 500..1_000 {
            keys.record(hash(i), 300, 50);
        }
        assert!(!keys.may_hold(hash(1), 300));
        // The early generations go at 100, the later ones at 300.
        keys.expire(99);
        let both = keys.bytes();
        assert!(both > early);
        keys.expire(100);
        assert!(keys.bytes() > 0 && keys.bytes() < both);
        assert!((500..1_000).all(|i| keys.may_hold(hash(i), 299)));
        keys.expire(300);
        assert_eq!(keys.bytes(), 0);
        keys.record(hash(1), 300, 200);
        assert!(keys.may_hold(hash(1), 299));
        assert!(!keys.may_hold(hash(2), 299));
    }

    #[test]
    fn past_the_bound_every_key_may_be_held_until_the_overflow_would_be_full() {
        let mut keys = EvictedKeys::new(16);
        let bound = 16 * SLOTS_PER_KEY;
        for i in 0..bound as u64 {
            keys.record(hash(i), 100 + i, 0);
            assert!(keys.bytes() <= 2 * bound);
            assert!(keys.generations.len() <= MAX_GENERATIONS);
        }
        assert!(keys.overflow_until > 0, "the bound was reached");
        let last = keys.overflow_until;
        assert!(keys.may_hold(hash(u64::MAX), last - 1));
        // The overflow ends with the latest key it did not write.
        keys.expire(last);
        assert!(!keys.may_hold(hash(u64::MAX), last));
    }
}
