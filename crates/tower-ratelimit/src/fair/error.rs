//! What is wrong with a fair queue's or an adaptive limit's settings.

use std::fmt;

/// What is wrong with a fair queue's or an adaptive limit's settings.
///
/// ```
/// use tower_ratelimit::fair::{FairQueueBuildError, FairQueueLayer};
/// use tower_ratelimit::key::Global;
///
/// let err = FairQueueLayer::builder(Global).concurrency(0).build().unwrap_err();
/// assert_eq!(err, FairQueueBuildError::ZeroConcurrency);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FairQueueBuildError {
    /// The adaptive limit's minimum is 0: it could stop admitting for good.
    ZeroMinimum,
    /// The adaptive limit's maximum is below its minimum.
    MaxBelowMin {
        /// The minimum.
        min: usize,
        /// The maximum.
        max: usize,
    },
    /// The latency target is zero.
    ZeroTarget,
    /// The backoff ratio is not strictly between 0 and 1.
    Backoff(f64),
    /// The fair queue's concurrency is 0: nothing would ever run.
    ZeroConcurrency,
    /// The per-key queue bound exceeds the total one.
    PerKeyAboveTotal {
        /// The per-key bound.
        per_key: usize,
        /// The total bound.
        total: usize,
    },
    /// The DRR quantum is 0.
    ZeroQuantum,
}

impl fmt::Display for FairQueueBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroMinimum => f.write_str("the adaptive limit's minimum must be at least 1"),
            Self::MaxBelowMin { min, max } => {
                write!(
                    f,
                    "the adaptive limit's maximum {max} is below its minimum {min}"
                )
            }
            Self::ZeroTarget => f.write_str("the latency target must be positive"),
            Self::Backoff(r) => write!(f, "backoff ratio {r} is not strictly between 0 and 1"),
            Self::ZeroConcurrency => f.write_str("the fair queue's concurrency must be at least 1"),
            Self::PerKeyAboveTotal { per_key, total } => write!(
                f,
                "{per_key} waiting per key exceeds the {total} waiting in all"
            ),
            Self::ZeroQuantum => f.write_str("the round-robin quantum must be at least 1"),
        }
    }
}

impl std::error::Error for FairQueueBuildError {}
