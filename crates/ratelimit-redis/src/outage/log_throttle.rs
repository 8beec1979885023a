//! Rate-limited logging: while Redis fails, every call fails, and one log
//! line per call would bury everything else (and cost more than the call).
//! A [`LogThrottle`] lets through at most one line per kind of event every
//! [`LOG_EVERY`], and each line says how many events of its kind were not
//! logged since the previous one.

use std::time::Duration;
use tokio::time::Instant;

/// The shortest time between two lines of the same kind: at most three a
/// minute.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(20);

/// [`ratelimit_core::LogThrottle`] on tokio's clock (so that tests can
/// pause it): `N` kinds, each on its own schedule, fixed memory.
#[derive(Debug)]
pub(crate) struct LogThrottle<const N: usize> {
    base: Instant,
    inner: ratelimit_core::LogThrottle<N>,
}

impl<const N: usize> LogThrottle<N> {
    /// At most one line per kind every `every`.
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            base: Instant::now(),
            inner: ratelimit_core::LogThrottle::new(every),
        }
    }

    /// Records an event of kind `kind` (below `N`) at `now`. `Some(n)`: log
    /// a line now, mentioning the `n` events of this kind suppressed since
    /// the last line; `None`: stay silent (the event is counted for the
    /// next line).
    pub(crate) fn admit(&self, kind: usize, now: Instant) -> Option<u64> {
        let nanos = now.saturating_duration_since(self.base).as_nanos();
        self.inner
            .admit(kind, u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_minute_of_errors_at_every_millisecond_logs_three_lines() {
        let t = LogThrottle::<1>::new(LOG_EVERY);
        let mut lines = Vec::new();
        for _ in 0..60_000 {
            if let Some(n) = t.admit(0, Instant::now()) {
                lines.push(n);
            }
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        // 60,000 events: three lines, the later two each accounting for the
        // 19,999 events before them.
        assert_eq!(lines, [0, 19_999, 19_999]);
    }
}
