//! Random operations for a history: checks, refunds and peeks in a mix.

use super::*;
use std::fmt::Debug;

/// How often a random workload asks for each operation, in percent (the
/// rest are checks, mostly of cost 1, else of cost 0 to `max_cost`).
///
/// ```
/// use ratelimit_test_support::history::{Mix, Op};
/// use ratelimit_test_support::SplitMix64;
///
/// let mut rng = SplitMix64(7);
/// let op = Mix::CHECKS.op(&mut rng, 0, 1_000);
/// assert!(matches!(op, Op::Check(0..=2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Refunds of cost 1.
    pub refund: u64,
    /// Settlements of a reservation of 1 or 2 to 0 to 3 (GCRA and the
    /// token bucket only).
    pub settle: u64,
    /// Resets.
    pub reset: u64,
    /// Bans.
    pub ban: u64,
    /// Unbans.
    pub unban: u64,
    /// The largest cost of a check.
    pub max_cost: u64,
}

impl Mix {
    /// Checks only, of costs 0 to 2.
    pub const CHECKS: Mix = Mix {
        refund: 0,
        settle: 0,
        reset: 0,
        ban: 0,
        unban: 0,
        max_cost: 2,
    };

    /// Checks, refunds, resets, bans and unbans (no settlements).
    pub const ALL: Mix = Mix {
        refund: 15,
        settle: 0,
        reset: 3,
        ban: 4,
        unban: 6,
        max_cost: 3,
    };

    /// A random operation: a refund gives back one unit admitted at
    /// `admitted_at`, a ban lasts `ban_for` ns.
    pub fn op(&self, rng: &mut crate::SplitMix64, admitted_at: u64, ban_for: u64) -> Op {
        let mut roll = rng.below(100);
        let settle = Op::Settle {
            reserved: 1 + rng.below(2),
            actual: rng.below(4),
            admitted_at,
        };
        for (percent, op) in [
            (
                self.refund,
                Op::Refund {
                    cost: 1,
                    admitted_at,
                },
            ),
            (self.settle, settle),
            (self.reset, Op::Reset),
            (self.ban, Op::Ban(ban_for)),
            (self.unban, Op::Unban),
        ] {
            if roll < percent {
                return op;
            }
            roll -= percent;
        }
        if rng.chance(60) {
            Op::Check(1)
        } else {
            Op::Check(rng.below(self.max_cost + 1))
        }
    }
}
