//! What the checker reports: a summary of the search, or the violation found.

use std::fmt::{self, Debug};

/// What a checked history held.
///
/// ```
/// use ratelimit_test_support::history::{Checker, Recorder};
/// use ratelimit_test_support::model::Spec;
///
/// let none = Recorder::<u8>::new().events();
/// let spec = Spec::Window { limit: 2, period: 10 };
/// assert_eq!(Checker::new(spec).check(&none).unwrap().ops, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Keys checked.
    pub keys: usize,
    /// Operations checked.
    pub ops: usize,
    /// The most operations of one key.
    pub largest: usize,
    /// Operations overlapping another of their key in real time.
    pub overlapping: usize,
    /// Search steps taken, over every key.
    pub steps: u64,
}

impl Summary {
    /// Adds `other`'s counts (`largest`: the larger).
    pub fn add(&mut self, other: Summary) {
        self.keys += other.keys;
        self.ops += other.ops;
        self.largest = self.largest.max(other.largest);
        self.overlapping += other.overlapping;
        self.steps += other.steps;
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} keys, {} operations ({} overlapping another), at most {} per key, {} steps",
            self.keys, self.ops, self.overlapping, self.largest, self.steps
        )
    }
}

/// Why a history was not accepted.
///
/// ```
/// use ratelimit_test_support::history::{Answer, Checker, Event, Op, Violation};
/// use ratelimit_test_support::model::Spec;
///
/// // A burst of 1 admitting a cost of 2.
/// let answer = Some(Answer::new(true, 0, Some(std::time::Duration::ZERO), false));
/// let e = Event { key: 0, op: Op::Check(2), now: 0, invoke: 0, ret: 1, answer };
/// let checker = Checker::new(Spec::Gcra { limit: 1, period: 10, burst: 1 });
/// assert!(matches!(checker.check(&[e]), Err(Violation::NotLinearizable { .. })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// No order of the key's operations gives every answer seen.
    NotLinearizable {
        /// The key, as `Debug` shows it.
        key: String,
        /// The longest prefix found, then the operation none could follow.
        report: String,
    },
    /// The search ran out of steps before it decided.
    Undecided {
        /// The key, as `Debug` shows it.
        key: String,
        /// Its operations.
        ops: usize,
    },
    /// A key has more operations than the search takes (128).
    TooLong {
        /// The key, as `Debug` shows it.
        key: String,
        /// Its operations.
        ops: usize,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::NotLinearizable { key, report } => {
                write!(f, "key {key}: not linearizable\n{report}")
            }
            Violation::Undecided { key, ops } => {
                write!(f, "key {key}: {ops} operations, search out of steps")
            }
            Violation::TooLong { key, ops } => {
                write!(f, "key {key}: {ops} operations, more than 128")
            }
        }
    }
}
