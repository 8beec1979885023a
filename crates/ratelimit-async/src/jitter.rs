//! Random delays for jitter and backoff.

use ratelimit_core::plumbing::saturating_nanos;
use std::time::Duration;

/// A random duration, uniform in `[0, max]` (to the nanosecond); zero for
/// a zero `max`, or if the system's random source fails.
pub(crate) fn up_to(max: Duration) -> Duration {
    let max = saturating_nanos(max);
    if max == 0 {
        return Duration::ZERO;
    }
    let random = getrandom::u64().unwrap_or(0);
    // Multiply-shift: uniform enough for jitter, no division.
    let nanos = (u128::from(random) * (u128::from(max) + 1)) >> 64;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_bounds_and_spreads() {
        assert_eq!(up_to(Duration::ZERO), Duration::ZERO);
        let max = Duration::from_millis(100);
        let draws: Vec<Duration> = (0..2000).map(|_| up_to(max)).collect();
        assert!(draws.iter().all(|d| *d <= max));
        // Each tenth of the range gets some of 2000 draws.
        for tenth in 0..10u32 {
            let (lo, hi) = (max * tenth / 10, max * (tenth + 1) / 10);
            assert!(draws.iter().any(|d| *d >= lo && *d < hi), "{tenth}");
        }
    }
}
