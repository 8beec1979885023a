//! The token bucket: capacity `C`, refilled at `R` per `P`.

use super::gcra::Names;
use super::interval::StateWord;
use super::StableKey;
use super::{nonzero, Algorithm};
use crate::Gcra;
use crate::{ConfigError, Decision};
use std::time::Duration;

/// A token bucket of `capacity` tokens, refilled continuously at `refill`
/// per `period`. It decides exactly like GCRA with limit `refill`, period
/// `period` and burst `capacity`, and stores the same state per key.
///
/// `TokenBucket` (that is `TokenBucket<u64>`) keeps 8 bytes per key and
/// refuses settings that state cannot hold with [`ConfigError::Overflow`]
/// (for instance a capacity of 1,000,000 refilled at 7 per day);
/// `TokenBucket<u128>`, built with [`new_wide`](TokenBucket::new_wide),
/// keeps 16 bytes and holds them. See [`Gcra`]'s "State width", and
/// [`AnyTokenBucket`](crate::algorithm::AnyTokenBucket), which picks the width.
///
/// ```
/// use ratelimit_core::{Algorithm, TokenBucket};
/// use std::time::Duration;
///
/// // Stripe's API limit: a burst of 500, refilled at 100 per second.
/// let bucket = TokenBucket::new(500, 100, Duration::from_secs(1)).unwrap();
/// let mut state = bucket.fresh("key", 0);
/// assert_eq!(bucket.check(&mut state, 500, 0).remaining, 0);
/// assert!(bucket.check(&mut state, 1, 10_000_000).allowed); // 10 ms later
///
/// // A million tokens refilled at 7 per day needs the wide state.
/// let day = Duration::from_secs(86_400);
/// assert!(TokenBucket::new(1_000_000, 7, day).is_err());
/// let wide = TokenBucket::new_wide(1_000_000, 7, day).unwrap();
/// let mut state = wide.fresh("key", 0);
/// assert_eq!(wide.check(&mut state, 1, 0).remaining, 999_999);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket<W: StateWord = u64> {
    gcra: Gcra<W>,
}

const NARROW: Names = [
    "refill / period for the 8-byte state of TokenBucket (use TokenBucket<u128>)",
    "capacity * period / refill for the 8-byte state of TokenBucket (use TokenBucket<u128>)",
];
const WIDE: Names = ["refill / period", "capacity * period / refill"];

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill` per `period`,
    /// with an 8-byte state.
    ///
    /// Fails with [`ConfigError::Overflow`] when the 8-byte state cannot
    /// hold the setting: use [`TokenBucket::new_wide`] or
    /// [`AnyTokenBucket`](crate::algorithm::AnyTokenBucket).
    pub fn new(capacity: u64, refill: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::build(capacity, refill, period, NARROW)
    }
}

impl TokenBucket<u128> {
    /// A bucket of `capacity` tokens refilled at `refill` per `period`,
    /// with a 16-byte state.
    pub fn new_wide(capacity: u64, refill: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::build(capacity, refill, period, WIDE)
    }
}

impl<W: StateWord> TokenBucket<W> {
    fn build(
        capacity: u64,
        refill: u64,
        period: Duration,
        names: Names,
    ) -> Result<Self, ConfigError> {
        let capacity = nonzero(capacity, "capacity")?;
        let refill = nonzero(refill, "refill")?;
        Ok(Self {
            gcra: Gcra::build(refill, period, capacity, names)?,
        })
    }

    pub(crate) fn from_gcra(gcra: Gcra<W>) -> Self {
        Self { gcra }
    }

    /// The capacity `C`.
    pub fn capacity(&self) -> u64 {
        self.gcra.burst()
    }

    /// The refill amount `R` per period.
    pub fn refill(&self) -> u64 {
        self.gcra.rate_limit()
    }

    /// The refill period `P`.
    pub fn period(&self) -> Duration {
        self.gcra.period()
    }

    /// The equivalent GCRA.
    pub fn as_gcra(&self) -> &Gcra<W> {
        &self.gcra
    }
}

impl<W: StateWord> Algorithm for TokenBucket<W> {
    /// The same state as [`Gcra<W>`](Gcra)'s.
    type State = <Gcra<W> as Algorithm>::State;

    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> Self::State {
        self.gcra.fresh(key, now)
    }

    #[inline]
    fn check(&self, state: &mut Self::State, cost: u64, now: u64) -> Decision {
        self.gcra.check(state, cost, now)
    }

    #[inline(always)]
    fn denies_read_only(&self) -> bool {
        true
    }

    #[inline(always)]
    fn check_denied(&self, state: &Self::State, cost: u64, now: u64) -> Option<Decision> {
        self.gcra.check_denied(state, cost, now)
    }

    /// Takes `cost` tokens whatever is left: below zero the key owes
    /// tokens, and is denied until the refill has paid them back (see
    /// [`Gcra`]'s `charge`).
    fn charge(&self, state: &mut Self::State, cost: u64, now: u64) -> Decision {
        self.gcra.charge(state, cost, now)
    }

    fn refund(&self, state: &mut Self::State, cost: u64, admitted_at: u64, now: u64) {
        self.gcra.refund(state, cost, admitted_at, now)
    }

    fn is_full(&self, state: &Self::State, now: u64) -> bool {
        self.gcra.is_full(state, now)
    }

    fn idle_horizon(&self) -> u64 {
        self.gcra.idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.gcra.limit()
    }

    fn window(&self) -> Duration {
        self.gcra.window()
    }

    fn name(&self) -> &'static str {
        "token-bucket"
    }
}
