//! Tokio's clock (feature `tokio`): follows `tokio::time::pause` and `advance`.

use crate::plumbing::saturating_nanos;
use crate::Clock;

/// Tokio's clock (`tokio::time::Instant`): follows `tokio::time::pause` and
/// `advance`, so tests of shaping and refills run without real sleeps.
///
/// ```
/// use ratelimit_core::{Clock, TokioClock};
///
/// let clock = TokioClock::new();
/// assert!(clock.now() < 1_000_000_000); // nanoseconds since its creation
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is tokio's now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> u64 {
        saturating_nanos(self.origin.elapsed())
    }
}
