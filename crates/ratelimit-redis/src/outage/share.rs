//! An instance's share of a limit while Redis is away: the limit divided
//! by the instances seen lately, so that the fleet's fallbacks together
//! admit about the limit, not the limit each.

use ratelimit_core::Decision;

/// This instance's share of each limit, `k` instances seen: a call of
/// cost `c` takes `min(c * k, C)` of a limit of capacity `C` in the
/// fallback's memory store (a cost above `C` as it is, never admitted).
/// So an instance admits `floor(C / k)` cost-1 calls of a full key, at
/// `1/k` of the limit's rate, and `k` instances at most `C` together;
/// with fewer than `k` in the capacity (`C < k`), each admits one, `k`
/// together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Share {
    k: u64,
}

impl Share {
    /// The share of one of `k` instances (at least 1).
    pub(crate) fn new(k: u64) -> Self {
        Self { k: k.max(1) }
    }

    /// What a call of `cost` takes of a limit of `capacity`.
    pub(crate) fn cost(self, cost: u64, capacity: u64) -> u64 {
        if self.k == 1 || cost > capacity {
            return cost;
        }
        cost.saturating_mul(self.k).min(capacity)
    }

    /// `d` (decided on shared costs) as the caller counts: its
    /// `remaining` in cost-1 calls of this instance's share.
    pub(crate) fn decision(self, mut d: Decision) -> Decision {
        let unit = self.cost(1, d.limit).max(1);
        d.remaining /= unit;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over `k` instances each admitting what its share allows of a full
    /// key, the fleet admits at most `max(C, k)`, and each at least one.
    #[test]
    fn k_shares_sum_to_at_most_the_capacity() {
        for capacity in 1..=40u64 {
            for k in 1..=12u64 {
                let share = Share::new(k);
                let each = capacity / share.cost(1, capacity);
                assert!(each >= 1, "C {capacity}, k {k}");
                assert!(each * k <= capacity.max(k), "C {capacity}, k {k}: {each}");
                if k <= capacity {
                    assert_eq!(each, capacity / k, "C {capacity}, k {k}");
                }
            }
        }
        // A cost above the capacity is never admitted, shared or not.
        assert_eq!(Share::new(3).cost(11, 10), 11);
        assert_eq!(Share::new(3).cost(0, 10), 0);
        assert_eq!(Share::new(1).cost(7, 10), 7);
        assert_eq!(Share::new(0), Share::new(1));
    }
}
