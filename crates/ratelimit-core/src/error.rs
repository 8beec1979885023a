//! Typed errors: invalid settings at construction, and store failures.

use std::fmt;
use std::time::Duration;

/// A rate-limit setting that cannot be honoured exactly. Returned by every
/// constructor; nothing panics on bad input.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A limit, capacity or refill amount of zero.
    ZeroLimit(&'static str),
    /// A period of zero.
    ZeroPeriod,
    /// A burst of zero.
    ZeroBurst,
    /// The period does not fit in `u64` nanoseconds (584 years).
    PeriodTooLong(Duration),
    /// The settings would overflow the exact integer arithmetic.
    Overflow(&'static str),
    /// A sliding log would keep more entries per key than allowed.
    LogTooLong {
        /// The requested limit.
        limit: u64,
        /// The configured bound on entries per key.
        max: u64,
    },
    /// A duration string that could not be parsed.
    BadDuration(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroLimit(what) => write!(f, "{what} must be at least 1"),
            Self::ZeroPeriod => f.write_str("period must be longer than zero"),
            Self::ZeroBurst => f.write_str("burst must be at least 1"),
            Self::PeriodTooLong(p) => write!(f, "period {p:?} is too long (at most 584 years)"),
            Self::Overflow(what) => write!(f, "{what} is too large to compute exactly"),
            Self::LogTooLong { limit, max } => write!(
                f,
                "sliding log limit {limit} exceeds the bound of {max} entries per key \
                 (memory is O(limit) per key; use sliding-window or raise the bound)"
            ),
            Self::BadDuration(s) => write!(
                f,
                "bad duration {s:?}: expected a positive integer and a unit (ms, s, m, h, d), like 500ms or 1h"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A store could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The in-memory store holds its configured maximum number of keys, and
    /// none of them could be dropped. See
    /// [`MemoryStoreBuilder::max_keys`](crate::MemoryStoreBuilder::max_keys).
    CapacityExceeded {
        /// The configured cap.
        max_keys: usize,
    },
    /// A remote store failed (connection, timeout, script error, ...).
    Backend(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityExceeded { max_keys } => {
                write!(f, "rate-limit store is full ({max_keys} keys)")
            }
            Self::Backend(msg) => write!(f, "rate-limit store failed: {msg}"),
        }
    }
}

impl std::error::Error for StoreError {}
