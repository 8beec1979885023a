//! Clocks for the layer: a process-wide system clock by default, and tokio's clock for tests.

use ratelimit_core::{Clock, SystemClock};
use std::sync::{Arc, OnceLock};

/// The default clock: one [`SystemClock`] for the whole process, so layers
/// sharing a store agree on the time.
pub(crate) fn default_clock() -> Arc<dyn Clock> {
    static CLOCK: OnceLock<Arc<SystemClock>> = OnceLock::new();
    CLOCK.get_or_init(|| Arc::new(SystemClock::new())).clone()
}

/// Tokio's clock (`tokio::time::Instant`): follows `tokio::time::pause` and
/// `advance`, so tests of shaping and refills run without real sleeps.
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
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
