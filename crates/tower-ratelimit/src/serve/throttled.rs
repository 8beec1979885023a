//! A warning let through at most once a second (`Throttled`).

use std::time::Duration;
use tokio::time::Instant;

/// Lets a warning through at most once a second, telling how many were
/// skipped since the last one.
///
/// ```
/// use tower_ratelimit::serve::Throttled;
///
/// let mut full = Throttled::new();
/// for _ in 0..3 {
///     full.warn(|skipped| tracing::warn!(skipped, "full"));
/// } // one warning, the next in a second says 2 were skipped
/// ```
#[derive(Debug, Default)]
pub struct Throttled {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttled {
    /// Lets the first warning through.
    pub fn new() -> Self {
        Self {
            last: None,
            skipped: 0,
        }
    }

    /// Calls `log` with the number skipped since the last call let
    /// through, unless one was let through less than a second ago.
    pub fn warn(&mut self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.skipped += 1;
            return;
        }
        self.last = Some(now);
        log(std::mem::take(&mut self.skipped));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn warnings_at_most_once_a_second() {
        let mut t = Throttled::new();
        let mut logged = Vec::new();
        for _ in 0..5 {
            t.warn(|skipped| logged.push(skipped));
            tokio::time::advance(Duration::from_millis(300)).await;
        }
        // t = 0, 300, 600, 900 ms: one; 1200 ms: the next, 3 skipped.
        assert_eq!(logged, [0, 3]);
    }
}
