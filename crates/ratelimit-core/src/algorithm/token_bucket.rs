//! The token bucket: capacity `C`, refilled at `R` per `P`.

use super::{nonzero, Algorithm, Gcra};
use crate::{ConfigError, Decision};
use std::hash::Hash;
use std::time::Duration;

/// A token bucket of `capacity` tokens, refilled continuously at `refill`
/// per `period`. It decides exactly like GCRA with limit `refill`, period
/// `period` and burst `capacity`, and stores the same 8 bytes per key.
///
/// ```
/// use ratelimit_core::{Algorithm, TokenBucket};
/// use std::time::Duration;
///
/// // Stripe's API limit: a burst of 500, refilled at 100 per second.
/// let bucket = TokenBucket::new(500, 100, Duration::from_secs(1)).unwrap();
/// let mut state = bucket.fresh("key", 0);
/// assert_eq!(bucket.check(&mut state, 0, 500).remaining, 0);
/// assert!(bucket.check(&mut state, 10_000_000, 1).allowed); // 10 ms later
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    gcra: Gcra,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill` per `period`.
    pub fn new(capacity: u64, refill: u64, period: Duration) -> Result<Self, ConfigError> {
        let capacity = nonzero(capacity, "capacity")?;
        let refill = nonzero(refill, "refill")?;
        Ok(Self {
            gcra: Gcra::with_burst(refill, period, capacity)?,
        })
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
    pub fn as_gcra(&self) -> &Gcra {
        &self.gcra
    }
}

impl Algorithm for TokenBucket {
    type State = u64;

    fn fresh<K: Hash + ?Sized>(&self, key: &K, now: u64) -> u64 {
        self.gcra.fresh(key, now)
    }

    #[inline]
    fn check(&self, state: &mut u64, now: u64, cost: u64) -> Decision {
        self.gcra.check(state, now, cost)
    }

    fn refund(&self, state: &mut u64, now: u64, admitted_at: u64, cost: u64) {
        self.gcra.refund(state, now, admitted_at, cost)
    }

    fn is_full(&self, state: &u64, now: u64) -> bool {
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
