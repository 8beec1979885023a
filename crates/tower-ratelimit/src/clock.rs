//! The layer's default clock: one process-wide system clock.

use ratelimit_core::{Clock, SystemClock};
use std::sync::{Arc, OnceLock};

/// The default clock: one [`SystemClock`] for the whole process, so layers
/// sharing a store agree on the time.
pub(crate) fn default_clock() -> Arc<dyn Clock> {
    static CLOCK: OnceLock<Arc<SystemClock>> = OnceLock::new();
    CLOCK.get_or_init(|| Arc::new(SystemClock::new())).clone()
}
