//! The exact emission interval `T = P / L`, and the scaled time it needs,
//! in a state word of either width (`u64` or `u128`).

use std::fmt::Debug;
use std::hash::Hash;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::time::Duration;

/// The integer GCRA, the token bucket and the leaky bucket keep their
/// scaled time in: `u64` (the default, 8 bytes per key) or `u128` (16 bytes
/// per key, for settings the 8-byte state cannot hold exactly).
///
/// ```
/// use ratelimit_core::Gcra;
/// use std::time::Duration;
///
/// let narrow: Gcra<u64> = Gcra::new(100, Duration::from_secs(60)).unwrap();
/// let wide: Gcra<u128> = Gcra::new_wide(100, Duration::from_secs(60)).unwrap();
/// # let _ = (narrow, wide);
/// ```
///
/// A state word of `N` bits holds scaled times modulo `2^N`, in units of
/// `1 / (L / gcd(L, P))` ns. A setting is accepted when every span the
/// algorithm keeps ahead of `now` (`B * T` for GCRA, `(Q + 2) * T` for the
/// leaky bucket) is at most `2^(N-3)` units, and the store's idle horizon is
/// `2^(N-2)` units (see
/// [`Algorithm::idle_horizon`](crate::Algorithm::idle_horizon); never under
/// 2 ns). With `u64` that is `B * T` up to `2^61` units; with `u128`, up to
/// `2^125` units: every burst when the period is at most 73 years (`2^61`
/// ns), and every burst up to `2^61` whatever the period. Either way the
/// window (`B * T`, the longest wait a decision can report) must also be a
/// [`Duration`] (at most 584 billion years).
///
/// This trait is sealed: it is implemented for `u64` and `u128` only.
pub trait StateWord: word::Word {}

impl StateWord for u64 {}
impl StateWord for u128 {}

pub(crate) mod word {
    use super::super::divisor::Divisor;
    use super::*;

    /// The arithmetic of a state word. Public in a private module, so that
    /// [`StateWord`](super::StateWord) is sealed.
    pub trait Word:
        Copy
        + Eq
        + Ord
        + Debug
        + Hash
        + Send
        + Sync
        + 'static
        + Add<Output = Self>
        + Sub<Output = Self>
        + Mul<Output = Self>
        + Div<Output = Self>
    {
        /// What a key stores: the word itself, or for `u128` its two
        /// halves (so that a state is 16 bytes aligned to 8, and a store's
        /// `(u64, state)` slot is 24 bytes rather than 32).
        type Stored: Copy + Debug + Eq + Hash + Send + Sync + 'static;
        /// The same bits read as a two's-complement number.
        type Signed: Copy + Ord + Neg<Output = Self::Signed>;
        /// 0.
        const ZERO: Self;
        /// The largest span ahead of `now` a state may hold: `2^(bits-3)`.
        const MAX_SPAN: Self;
        /// Scaled units a state may sit untouched: `2^(bits-2)`.
        const HORIZON_UNITS: Self;
        /// Whether this is the wide (`u128`) word.
        const WIDE: bool;

        fn from_u64(v: u64) -> Self;
        fn load(stored: Self::Stored) -> Self;
        fn store(self) -> Self::Stored;
        fn signed(self) -> Self::Signed;
        fn signed_zero() -> Self::Signed;
        fn wrapping_add(self, other: Self) -> Self;
        fn wrapping_sub(self, other: Self) -> Self;
        fn wrapping_mul(self, other: Self) -> Self;
        fn checked_add(self, other: Self) -> Option<Self>;
        fn checked_mul(self, other: Self) -> Option<Self>;
        /// A divisor fixed by a setting, as divisions by it take it.
        type Divisor: Copy + Debug + Eq + Hash + Send + Sync + 'static;
        /// `self` as a divisor (never 0).
        fn divisor(self) -> Self::Divisor;
        /// `floor(self / d)`.
        fn div_by(self, d: Self::Divisor) -> Self;
        /// `ceil(self / d)`.
        fn div_ceil_by(self, d: Self::Divisor) -> Self;
        /// The low 64 bits.
        fn low_u64(self) -> u64;
        /// Saturated to `u64::MAX`.
        fn saturating_u64(self) -> u64;
        /// `self` nanoseconds as a [`Duration`]; only called on values
        /// [`fits_duration`](Self::fits_duration) accepts.
        fn nanos(self) -> Duration;
        /// Whether `self` nanoseconds is a [`Duration`].
        fn fits_duration(self) -> bool;
    }

    impl Word for u64 {
        type Stored = u64;
        type Signed = i64;
        const ZERO: Self = 0;
        const MAX_SPAN: Self = 1 << 61;
        const HORIZON_UNITS: Self = 1 << 62;
        const WIDE: bool = false;

        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            v
        }
        #[inline(always)]
        fn load(stored: u64) -> Self {
            stored
        }
        #[inline(always)]
        fn store(self) -> u64 {
            self
        }
        #[inline(always)]
        fn signed(self) -> i64 {
            self as i64
        }
        #[inline(always)]
        fn signed_zero() -> i64 {
            0
        }
        #[inline(always)]
        fn wrapping_add(self, other: Self) -> Self {
            u64::wrapping_add(self, other)
        }
        #[inline(always)]
        fn wrapping_sub(self, other: Self) -> Self {
            u64::wrapping_sub(self, other)
        }
        #[inline(always)]
        fn wrapping_mul(self, other: Self) -> Self {
            u64::wrapping_mul(self, other)
        }
        #[inline(always)]
        fn checked_add(self, other: Self) -> Option<Self> {
            u64::checked_add(self, other)
        }
        #[inline(always)]
        fn checked_mul(self, other: Self) -> Option<Self> {
            u64::checked_mul(self, other)
        }
        type Divisor = Divisor;
        fn divisor(self) -> Divisor {
            Divisor::new(self)
        }
        #[inline(always)]
        fn div_by(self, d: Divisor) -> Self {
            d.div(self)
        }
        #[inline(always)]
        fn div_ceil_by(self, d: Divisor) -> Self {
            d.div_ceil(self)
        }
        #[inline(always)]
        fn low_u64(self) -> u64 {
            self
        }
        #[inline(always)]
        fn saturating_u64(self) -> u64 {
            self
        }
        #[inline(always)]
        fn nanos(self) -> Duration {
            Duration::from_nanos(self)
        }
        #[inline(always)]
        fn fits_duration(self) -> bool {
            true
        }
    }

    const NANOS_PER_SEC: u128 = 1_000_000_000;

    impl Word for u128 {
        type Stored = [u64; 2];
        type Signed = i128;
        const ZERO: Self = 0;
        const MAX_SPAN: Self = 1 << 125;
        const HORIZON_UNITS: Self = 1 << 126;
        const WIDE: bool = true;

        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            u128::from(v)
        }
        /// `[low, high]`.
        #[inline(always)]
        fn load(stored: [u64; 2]) -> Self {
            u128::from(stored[0]) | (u128::from(stored[1]) << 64)
        }
        #[inline(always)]
        fn store(self) -> [u64; 2] {
            [self as u64, (self >> 64) as u64]
        }
        #[inline(always)]
        fn signed(self) -> i128 {
            self as i128
        }
        #[inline(always)]
        fn signed_zero() -> i128 {
            0
        }
        #[inline(always)]
        fn wrapping_add(self, other: Self) -> Self {
            u128::wrapping_add(self, other)
        }
        #[inline(always)]
        fn wrapping_sub(self, other: Self) -> Self {
            u128::wrapping_sub(self, other)
        }
        #[inline(always)]
        fn wrapping_mul(self, other: Self) -> Self {
            u128::wrapping_mul(self, other)
        }
        #[inline(always)]
        fn checked_add(self, other: Self) -> Option<Self> {
            u128::checked_add(self, other)
        }
        #[inline(always)]
        fn checked_mul(self, other: Self) -> Option<Self> {
            u128::checked_mul(self, other)
        }
        /// A wide divisor: the division itself.
        type Divisor = u128;
        fn divisor(self) -> u128 {
            self
        }
        #[inline(always)]
        fn div_by(self, d: u128) -> Self {
            self / d
        }
        #[inline(always)]
        fn div_ceil_by(self, d: u128) -> Self {
            u128::div_ceil(self, d)
        }
        #[inline(always)]
        fn low_u64(self) -> u64 {
            self as u64
        }
        #[inline(always)]
        fn saturating_u64(self) -> u64 {
            u64::try_from(self).unwrap_or(u64::MAX)
        }
        #[inline]
        fn nanos(self) -> Duration {
            let secs = self / NANOS_PER_SEC;
            Duration::new(secs as u64, (self - secs * NANOS_PER_SEC) as u32)
        }
        fn fits_duration(self) -> bool {
            self / NANOS_PER_SEC <= u128::from(u64::MAX)
        }
    }
}

use word::Word;

/// Why a setting does not fit a state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// More than `MAX_SPAN` scaled units per nanosecond.
    Rate,
    /// A span over `MAX_SPAN`, or a window longer than a [`Duration`].
    Span,
}

/// `T = P / L` as an exact fraction. Time is counted in units of
/// `1 / scale` nanoseconds, so that `T` is the whole number `step`.
///
/// Scaled times are stored modulo `2^bits` and only ever compared as
/// differences to `now`, so they never overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval<W: Word> {
    /// `T` in scaled units.
    pub(crate) step: W,
    /// Scaled units per nanosecond.
    pub(crate) scale: W,
    /// `step` and `scale` as divisors (see `divisor`).
    per_step: W::Divisor,
    per_ns: W::Divisor,
}

impl<W: Word> Interval<W> {
    /// `T = period_ns / limit`, reduced.
    ///
    /// Refused when one nanosecond is more than `MAX_SPAN` scaled units
    /// (for `u64`, more than 2^61 requests per nanosecond once reduced; never
    /// for `u128`): the scaled time of a state a nanosecond old could then
    /// no longer be told from one in the future, and the idle horizon would
    /// be under two nanoseconds. So the horizon is never 0.
    pub(crate) fn new(limit: u64, period_ns: u64) -> Result<Self, Refusal> {
        let g = gcd(limit, period_ns);
        let (step, scale) = (W::from_u64(period_ns / g), W::from_u64(limit / g));
        let interval = Self {
            step,
            scale,
            per_step: step.divisor(),
            per_ns: scale.divisor(),
        };
        if interval.scale > W::MAX_SPAN {
            return Err(Refusal::Rate);
        }
        Ok(interval)
    }

    /// `count * T` in scaled units, if it stays within the span the
    /// wrapping arithmetic supports.
    pub(crate) fn span(&self, count: W) -> Result<W, Refusal> {
        count
            .checked_mul(self.step)
            .filter(|s| *s <= W::MAX_SPAN)
            .ok_or(Refusal::Span)
    }

    /// `span` (a window, the longest wait a decision can report), if it is
    /// a [`Duration`] once rounded up to whole nanoseconds.
    pub(crate) fn reportable(&self, span: W) -> Result<W, Refusal> {
        if self.nanos_ceil(span).fits_duration() {
            Ok(span)
        } else {
            Err(Refusal::Span)
        }
    }

    /// `now` in scaled units (mod `2^bits`).
    #[inline(always)]
    pub(crate) fn units(&self, now: u64) -> W {
        W::from_u64(now).wrapping_mul(self.scale)
    }

    /// Scaled units to nanoseconds, rounded up.
    #[inline(always)]
    pub(crate) fn nanos_ceil(&self, units: W) -> W {
        // Most quotas reduce to whole nanoseconds (scale 1): skip the
        // division on the hot path.
        if self.scale == W::from_u64(1) {
            units
        } else {
            units.div_ceil_by(self.per_ns)
        }
    }

    /// Whole steps (`T`s) in `units`, rounded down.
    #[inline(always)]
    pub(crate) fn steps(&self, units: W) -> W {
        units.div_by(self.per_step)
    }

    /// Scaled units to a [`Duration`], rounded up to a whole nanosecond.
    #[inline(always)]
    pub(crate) fn duration_ceil(&self, units: W) -> Duration {
        self.nanos_ceil(units).nanos()
    }

    /// Nanoseconds a state may sit untouched: `2^(bits-2) / scale`, at least
    /// 2 (since `scale` is at most `2^(bits-3)`), and `u64::MAX` (no
    /// horizon) when it is longer than any `u64` time.
    pub(crate) fn idle_horizon(&self) -> u64 {
        (W::HORIZON_UNITS / self.scale).saturating_u64()
    }
}

/// `state - now` in scaled units, as a signed number.
#[inline(always)]
pub(crate) fn ahead<W: Word>(state: W, now_units: W) -> W::Signed {
    state.wrapping_sub(now_units).signed()
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

    const MAX_SPAN: u64 = <u64 as Word>::MAX_SPAN;

    #[test]
    fn reduces_the_fraction() {
        let i = Interval::<u64>::new(3, 1_000_000_000).unwrap();
        assert_eq!((i.step, i.scale), (1_000_000_000, 3));
        let i = Interval::<u64>::new(5000, 3_600_000_000_000).unwrap();
        assert_eq!((i.step, i.scale), (720_000_000, 1));
        assert_eq!(i.nanos_ceil(7), 7);
        let i = Interval::<u64>::new(3, 1_000_000_000).unwrap();
        assert_eq!(i.nanos_ceil(700_000_000), 233_333_334);
        let i = Interval::<u128>::new(3, 1_000_000_000).unwrap();
        assert_eq!((i.step, i.scale), (1_000_000_000, 3));
    }

    #[test]
    fn rejects_more_than_2_61_units_per_nanosecond() {
        assert!(Interval::<u64>::new(MAX_SPAN, 1).is_ok());
        assert_eq!(Interval::<u64>::new(MAX_SPAN + 1, 1), Err(Refusal::Rate));
        // Reduced first: 2^62 per 2 ns is 2^61 per ns.
        assert!(Interval::<u64>::new(1 << 62, 2).is_ok());
        assert!(Interval::<u64>::new(u64::MAX, 709_551_616).is_err());
        // The wide word takes every rate.
        let i = Interval::<u128>::new(u64::MAX, 1).unwrap();
        assert_eq!(
            i.idle_horizon(),
            (1u128 << 126).div_euclid(u128::from(u64::MAX)) as u64
        );
        assert_eq!(
            Interval::<u128>::new(1 << 62, 1).unwrap().idle_horizon(),
            u64::MAX
        );
    }

    #[test]
    fn wide_spans_and_durations() {
        let i = Interval::<u128>::new(1, u64::MAX).unwrap();
        assert!(i.span(1 << 61).is_ok());
        assert_eq!(i.span(1 << 62), Err(Refusal::Span));
        // 2^61 * (2^64 - 1) ns is far longer than a `Duration`.
        assert_eq!(i.reportable(i.span(1 << 61).unwrap()), Err(Refusal::Span));
        let max = u128::from(u64::MAX) * 1_000_000_000 + 999_999_999;
        let one = Interval::<u128>::new(1, 1).unwrap();
        assert_eq!(one.reportable(max), Ok(max));
        assert_eq!(one.duration_ceil(max), Duration::MAX);
        assert_eq!(one.reportable(max + 1), Err(Refusal::Span));
    }

    #[test]
    fn wide_states_round_trip() {
        for v in [
            0u128,
            1,
            u128::from(u64::MAX),
            1 << 64,
            u128::MAX,
            0x1234 << 70,
        ] {
            assert_eq!(<u128 as Word>::load(v.store()), v);
        }
        assert_eq!(std::mem::align_of::<<u128 as Word>::Stored>(), 8);
    }
}
