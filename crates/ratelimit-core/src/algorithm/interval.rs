//! The exact emission interval `T = P / L`, and the scaled time it needs.

use crate::ConfigError;

/// Largest scaled span a state may hold ahead of `now`; see the module docs
/// of [`MemoryStore`](crate::MemoryStore) for why the wrapping arithmetic
/// stays unambiguous below it.
pub(crate) const MAX_SPAN: u64 = 1 << 61;
/// Scaled units a state may sit untouched before it must be swept.
const HORIZON_UNITS: u64 = 1 << 62;

/// `T = P / L` as an exact fraction. Time is counted in units of
/// `1 / scale` nanoseconds, so that `T` is the whole number `step`.
///
/// Scaled times are stored modulo 2^64 and only ever compared as
/// differences to `now`, so they never overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval {
    /// `T` in scaled units.
    pub(crate) step: u64,
    /// Scaled units per nanosecond.
    pub(crate) scale: u64,
}

impl Interval {
    /// `T = period_ns / limit`, reduced.
    ///
    /// Fails when one nanosecond is more than [`MAX_SPAN`] scaled units
    /// (more than 2^61 requests per nanosecond, once reduced): the scaled
    /// time of a state a nanosecond old could then no longer be told from
    /// one in the future (past 2^63 units it wraps), and the store's idle
    /// horizon would be under two nanoseconds.
    pub(crate) fn new(limit: u64, period_ns: u64) -> Result<Self, ConfigError> {
        let g = gcd(limit, period_ns);
        let interval = Self {
            step: period_ns / g,
            scale: limit / g,
        };
        if interval.scale > MAX_SPAN {
            return Err(ConfigError::Overflow("limit / period"));
        }
        Ok(interval)
    }

    /// `count * T` in scaled units, if it stays within the span the
    /// wrapping arithmetic supports.
    pub(crate) fn span(&self, count: u64, what: &'static str) -> Result<u64, ConfigError> {
        count
            .checked_mul(self.step)
            .filter(|s| *s <= MAX_SPAN)
            .ok_or(ConfigError::Overflow(what))
    }

    /// `now` in scaled units (mod 2^64).
    #[inline]
    pub(crate) fn units(&self, now: u64) -> u64 {
        now.wrapping_mul(self.scale)
    }

    /// Scaled units to nanoseconds, rounded up.
    #[inline]
    pub(crate) fn nanos_ceil(&self, units: u64) -> u64 {
        units.div_ceil(self.scale)
    }

    /// Nanoseconds a state may sit untouched: at least 2, since `scale` is
    /// at most 2^61.
    pub(crate) fn idle_horizon(&self) -> u64 {
        HORIZON_UNITS / self.scale
    }
}

/// `state - now` in scaled units, as a signed number.
#[inline]
pub(crate) fn ahead(state: u64, now_units: u64) -> i64 {
    state.wrapping_sub(now_units) as i64
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_the_fraction() {
        let i = Interval::new(3, 1_000_000_000).unwrap();
        assert_eq!((i.step, i.scale), (1_000_000_000, 3));
        let i = Interval::new(5000, 3_600_000_000_000).unwrap();
        assert_eq!((i.step, i.scale), (720_000_000, 1));
        assert_eq!(i.nanos_ceil(7), 7);
        let i = Interval::new(3, 1_000_000_000).unwrap();
        assert_eq!(i.nanos_ceil(700_000_000), 233_333_334);
    }

    #[test]
    fn rejects_more_than_2_61_units_per_nanosecond() {
        assert!(Interval::new(MAX_SPAN, 1).is_ok());
        assert_eq!(
            Interval::new(MAX_SPAN + 1, 1),
            Err(ConfigError::Overflow("limit / period"))
        );
        // Reduced first: 2^62 per 2 ns is 2^61 per ns.
        assert!(Interval::new(1 << 62, 2).is_ok());
        assert!(Interval::new(u64::MAX, 709_551_616).is_err());
    }
}
