//! [`SimError`]: why the sim stopped.

use ratelimit_core::ConfigError;
use std::fmt;

/// Why the sim stopped: bad options or a bad input line.
///
/// ```
/// use ratelimit_sim::{parse_line, SimError};
///
/// let err: SimError = parse_line("-1 alice").unwrap_err();
/// assert!(!err.to_string().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError(pub String);

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

impl From<ConfigError> for SimError {
    fn from(e: ConfigError) -> Self {
        SimError(e.to_string())
    }
}
