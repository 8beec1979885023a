//! A gate for log lines: while a store fails, every call fails, and one
//! line per call would bury everything else (and cost more than the call).
//! A [`LogThrottle`] lets through at most one event per kind every
//! interval, and each one it lets through says how many of its kind were
//! held back since the previous one.

use crate::plumbing::saturating_nanos;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

#[derive(Debug, Default)]
struct Slot {
    /// When the last event of this kind was let through.
    last: Option<u64>,
    /// Events of this kind since then, held back.
    suppressed: u64,
}

/// Decides which events get a log line: `N` kinds, each on its own
/// schedule. Memory is fixed (`N` slots), whatever the event rate. Times
/// are nanoseconds of any clock that never goes back.
///
/// ```
/// use ratelimit_core::plumbing::LogThrottle;
/// use std::time::Duration;
///
/// let throttle = LogThrottle::<1>::new(Duration::from_secs(20));
/// assert_eq!(throttle.admit(0, 0), Some(0)); // log it
/// assert_eq!(throttle.admit(0, 1), None); // held back, counted
/// assert_eq!(throttle.admit(0, 20_000_000_000), Some(1)); // log, "1 more"
/// ```
#[derive(Debug)]
pub struct LogThrottle<const N: usize> {
    every: u64,
    slots: [Mutex<Slot>; N],
}

impl<const N: usize> LogThrottle<N> {
    /// At most one event per kind every `every`.
    pub fn new(every: Duration) -> Self {
        Self {
            every: saturating_nanos(every),
            slots: std::array::from_fn(|_| Mutex::new(Slot::default())),
        }
    }

    /// Records an event of kind `kind` (below `N`; others count as the
    /// last kind) at `now`. `Some(n)`: log a line now, mentioning the `n`
    /// events of this kind held back since the last line; `None`: stay
    /// silent (the event is counted for the next line).
    pub fn admit(&self, kind: usize, now: u64) -> Option<u64> {
        let slot = &self.slots[kind.min(N.saturating_sub(1))];
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        let due = match slot.last {
            None => true,
            // A `now` older than the last line (callers race to get here)
            // saturates to zero: not due.
            Some(last) => now.saturating_sub(last) >= self.every,
        };
        if due {
            slot.last = Some(now);
            Some(std::mem::take(&mut slot.suppressed))
        } else {
            slot.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_per_kind_carrying_the_suppressed_count() {
        let t = LogThrottle::<2>::new(Duration::from_secs(20));
        let ms = |ms: u64| ms * 1_000_000;
        // The first event of a kind is let through at once.
        assert_eq!(t.admit(0, ms(0)), Some(0));
        // 10,000 more within the interval: silent, counted.
        for i in 0..10_000 {
            assert_eq!(t.admit(0, ms(i % 19_999)), None);
        }
        // Kinds are independent.
        assert_eq!(t.admit(1, ms(5)), Some(0));
        assert_eq!(t.admit(1, ms(6)), None);
        // The interval is over: one line, with the count.
        assert_eq!(t.admit(0, ms(20_000)), Some(10_000));
        assert_eq!(t.admit(0, ms(20_001)), None);
        assert_eq!(t.admit(0, ms(39_999)), None);
        assert_eq!(t.admit(0, ms(40_000)), Some(2));
        // A late caller with an older time does not reopen the gate.
        assert_eq!(t.admit(0, ms(10_000)), None);
        // Long silence: the next event is let through, with what was left.
        assert_eq!(t.admit(1, ms(3_600_000)), Some(1));
    }

    #[test]
    fn a_minute_of_events_at_every_millisecond_gives_three_lines() {
        let t = LogThrottle::<1>::new(Duration::from_secs(20));
        let lines: Vec<u64> = (0..60_000u64)
            .filter_map(|ms| t.admit(0, ms * 1_000_000))
            .collect();
        assert_eq!(lines, [0, 19_999, 19_999]);
    }
}
