//! What evicted keys had used: a small sketch that a returning key is
//! restored from, so that eviction at the cap never gives quota back,
//! behind a set of the keys evicted lately, so that a key never evicted
//! starts fresh under a flood.
//!
//! The sketch is a count-min that keeps maxima instead of sums: each
//! evicted key writes its use into one cell of each of two rows (cells
//! picked by the key's seeded hash), and each cell holds the largest use
//! written into it that is still live, with the latest instant at which
//! any of those keys would have been full again. Every cell a key wrote
//! into holds at least its use until its state would have been full.
//!
//! A new key first asks the set ([`EvictedKeys`]) whether it may have
//! been evicted and not be full yet; the set answers yes for every such
//! key. If not, it starts fresh; if so, it reads its two cells and starts
//! with the smaller of their uses. So a returning key starts at least as
//! used as it left: the estimate errs up, never down. A key never evicted
//! starts used only when the set mistakes it for an evicted one (its
//! fingerprint met in a generation's probe, or the set past its bound)
//! and both of its cells are live; it then starts as used as the most
//! used evicted key of its cells, and if it is admitted and evicted in
//! turn it records that estimate plus its own use (the cells ratchet
//! only through such keys).

use super::evicted_keys::EvictedKeys;

/// Rows of the sketch: a key is overestimated only when both of its cells
/// hold more than its own use.
const ROWS: usize = 2;

/// An odd constant with well-spread bits, for picking cells.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    /// The largest use (whole requests) written since the cell was empty.
    used: u64,
    /// When every key written into the cell would be full again (ns of
    /// the store's clock): from then on the cell counts as empty.
    until: u64,
}

/// Two rows of `width` cells, and the set of keys evicted lately.
#[derive(Debug)]
pub(super) struct Evicted {
    cells: Box<[Cell]>,
    bits: u32,
    keys: EvictedKeys,
}

impl Evicted {
    /// A sketch of two rows of `width` cells (rounded up to a power of
    /// two, at least 2), for a shard of `width` keys at its cap.
    pub(super) fn new(width: usize) -> Self {
        let keys = EvictedKeys::new(width);
        let width = width.max(2).next_power_of_two();
        Self {
            cells: vec![Cell::default(); ROWS * width].into_boxed_slice(),
            bits: width.trailing_zeros(),
            keys,
        }
    }

    /// The cell of row `row` for the key hashed `hash`: the top bits of
    /// the hash mixed per row (the table and the shard use the hash's
    /// low and top bits as they are).
    fn index(&self, hash: u64, row: usize) -> usize {
        let mixed = hash.rotate_left(17 * row as u32 + 11).wrapping_mul(MIX);
        let i = (mixed >> (64 - self.bits)) as usize;
        (row << self.bits) | i
    }

    /// Records that the key hashed `hash`, evicted at `now`, had `used`
    /// whole requests of its quota taken and would be full at `until`.
    pub(super) fn record(&mut self, hash: u64, used: u64, until: u64, now: u64) {
        if used == 0 || until <= now {
            return;
        }
        self.keys.record(hash, until, now);
        for row in 0..ROWS {
            let i = self.index(hash, row);
            let cell = &mut self.cells[i];
            if cell.until <= now {
                *cell = Cell { used, until };
            } else {
                cell.used = cell.used.max(used);
                cell.until = cell.until.max(until);
            }
        }
    }

    /// The use a key hashed `hash` starts with at `now`: at least what it
    /// had when it was evicted, if it was and would not be full yet.
    pub(super) fn used(&self, hash: u64, now: u64) -> u64 {
        if !self.keys.may_hold(hash, now) {
            return 0;
        }
        (0..ROWS)
            .map(|row| {
                let cell = self.cells[self.index(hash, row)];
                if cell.until <= now {
                    0
                } else {
                    cell.used
                }
            })
            .min()
            .unwrap_or(0)
    }

    /// Frees the set's generations whose keys are all full at `now`.
    pub(super) fn expire(&mut self, now: u64) {
        self.keys.expire(now);
    }
}

#[cfg(test)]
mod tests {
    use super::Evicted;

    #[test]
    fn a_recorded_key_reads_back_at_least_its_use_until_it_would_be_full() {
        let mut sketch = Evicted::new(4);
        sketch.record(7, 5, 100, 10);
        for other in 0..64u64 {
            sketch.record(other.wrapping_mul(0x1234_5678_9ABC_DEF1), 1, 200, 20);
        }
        assert!(sketch.used(7, 50) >= 5);
        assert!(sketch.used(7, 99) >= 5);
        // Past its own `until` it may still read the others' use, never
        // more than the largest written.
        assert!(sketch.used(7, 150) <= 5);
        assert_eq!(sketch.used(7, 200), 0);
    }

    #[test]
    fn a_key_never_evicted_starts_fresh_though_its_cells_are_used() {
        let mut sketch = Evicted::new(4);
        for other in 0..64u64 {
            sketch.record(other.wrapping_mul(0x1234_5678_9ABC_DEF1), 3, 200, 20);
        }
        let fresh = (1_000..2_000u64)
            .filter(|&k| sketch.used(k.wrapping_mul(0x1234_5678_9ABC_DEF1), 50) == 0)
            .count();
        assert!(fresh >= 990, "{fresh}");
    }

    #[test]
    fn an_expired_cell_is_overwritten_not_merged() {
        let mut sketch = Evicted::new(2);
        sketch.record(3, 9, 100, 0);
        sketch.record(3, 2, 300, 100);
        assert_eq!(sketch.used(3, 150), 2);
        assert_eq!(sketch.used(3, 300), 0);
    }

    #[test]
    fn nothing_is_recorded_for_a_full_key() {
        let mut sketch = Evicted::new(2);
        sketch.record(3, 0, 100, 0);
        sketch.record(4, 3, 10, 10);
        assert_eq!(sketch.used(3, 0), 0);
        assert_eq!(sketch.used(4, 5), 0);
    }
}
