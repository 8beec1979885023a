//! [`SpecError`]: why a text spec is not an algorithm.

use crate::ConfigError;
use std::fmt;

/// Why a text spec is not an algorithm. Every variant names the word at
/// fault.
///
/// ```
/// use ratelimit_core::{AnyAlgorithm, SpecError};
///
/// let err = "gcrra 10/1s".parse::<AnyAlgorithm>().unwrap_err();
/// assert_eq!(err, SpecError::UnknownAlgorithm("gcrra".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    /// Nothing but white space.
    Empty,
    /// The first word is not one of the six algorithms' names.
    UnknownAlgorithm(String),
    /// The rate word is missing.
    MissingRate {
        /// The algorithm.
        algorithm: &'static str,
    },
    /// A word that should be a rate `L/P` is not one.
    BadRate(String),
    /// A word that should be a non-negative integer is not one.
    BadNumber {
        /// What the number is (`burst`, `limit`, ...).
        what: &'static str,
        /// The word.
        token: String,
    },
    /// A duration that could not be parsed.
    BadDuration(String),
    /// An option this algorithm does not have.
    UnknownOption {
        /// The algorithm.
        algorithm: &'static str,
        /// The word.
        token: String,
    },
    /// An option with no value after it.
    MissingValue(String),
    /// An option given twice.
    Duplicate(String),
    /// A required option left out (`refill` of the token bucket).
    MissingOption {
        /// The algorithm.
        algorithm: &'static str,
        /// The option.
        option: &'static str,
    },
    /// An anchor other than `aligned`, `first-request` and `key-offset`.
    BadAnchor(String),
    /// A period that looks like a calendar unit but is not spelled `week`,
    /// `month` or `year` (`1mo`, `1w`, `2month`, `years`).
    BadCalendarPeriod(String),
    /// A calendar period (`week`, `month`, `year`) given to an algorithm
    /// other than the fixed window.
    CalendarUnsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// The period's word.
        period: String,
    },
    /// An anchor other than `aligned` with a calendar period: calendar
    /// windows are aligned on the UTC calendar.
    CalendarAnchor(String),
    /// Well formed, but the algorithm's constructor rejects the settings.
    Invalid(ConfigError),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty algorithm spec"),
            Self::UnknownAlgorithm(w) => write!(
                f,
                "unknown algorithm {w:?}: expected gcra, token-bucket, leaky-bucket, \
                 fixed-window, sliding-log or sliding-window"
            ),
            Self::MissingRate { algorithm } => {
                write!(f, "{algorithm}: missing the rate, like 100/1m")
            }
            Self::BadRate(w) => write!(
                f,
                "bad rate {w:?}: expected an integer, a slash and a duration, like 100/1m"
            ),
            Self::BadNumber { what, token } => {
                write!(f, "bad {what} {token:?}: expected a non-negative integer")
            }
            Self::BadDuration(w) => write!(
                f,
                "bad duration {w:?}: expected an integer and a unit (ns, us, ms, s, m, h, d), like 500ms or 1h"
            ),
            Self::UnknownOption { algorithm, token } => {
                write!(f, "{algorithm} has no option {token:?}")
            }
            Self::MissingValue(w) => write!(f, "option {w:?} has no value"),
            Self::Duplicate(w) => write!(f, "option {w:?} given twice"),
            Self::MissingOption { algorithm, option } => {
                write!(f, "{algorithm} needs the option {option:?}")
            }
            Self::BadAnchor(w) => write!(
                f,
                "bad anchor {w:?}: expected aligned, first-request or key-offset"
            ),
            Self::BadCalendarPeriod(w) => write!(
                f,
                "bad period {w:?}: a calendar period is written week, month or year \
                 (one unit, no number; m is minutes)"
            ),
            Self::CalendarUnsupported { algorithm, period } => write!(
                f,
                "{algorithm} cannot take the calendar period {period:?}: only fixed-window \
                 follows the calendar; write a duration (7d is a week)"
            ),
            Self::CalendarAnchor(w) => write!(
                f,
                "anchor {w:?} does not apply to a calendar period: its windows are \
                 aligned on the UTC calendar"
            ),
            Self::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for SpecError {
    fn from(e: ConfigError) -> Self {
        Self::Invalid(e)
    }
}
