//! What evicted keys had used: a small sketch that a returning key is
//! restored from, so that eviction at the cap never gives quota back.
//!
//! It is a count-min sketch that keeps maxima instead of sums: each
//! evicted key writes its use into one cell of each of two rows (cells
//! picked by the key's seeded hash), and each cell holds the largest use
//! written into it that is still live, with the latest instant at which
//! any of those keys would have been full again. A new key reads its two
//! cells and starts with the smaller of their uses. Every cell a key
//! wrote into holds at least its use until its state would have been
//! full, so a returning key starts at least as used as it left: the
//! sketch overestimates, never underestimates. Another key that shares
//! both cells may start with more used than it had (it never had a
//! state: it starts as used as the most used evicted key of its cells).

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

/// Two rows of `width` cells.
#[derive(Debug)]
pub(super) struct Evicted {
    cells: Box<[Cell]>,
    bits: u32,
}

impl Evicted {
    /// A sketch of two rows of `width` cells (a power of two, at least 2).
    pub(super) fn new(width: usize) -> Self {
        let width = width.max(2).next_power_of_two();
        Self {
            cells: vec![Cell::default(); ROWS * width].into_boxed_slice(),
            bits: width.trailing_zeros(),
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
