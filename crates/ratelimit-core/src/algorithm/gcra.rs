//! GCRA, the generic cell rate algorithm: `L` per `P` with a burst `B`.

use super::interval::{ahead, Interval};
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::hash::Hash;
use std::time::Duration;

/// GCRA: `limit` per `period`, with up to `burst` at once.
///
/// `T = P / L`; the state is the theoretical arrival time `TAT`. A request
/// of cost `n` at `t` is admitted iff `max(TAT, t) + n*T <= t + B*T`.
///
/// State: 8 bytes per key (the scaled `TAT`, stored modulo 2^64).
///
/// ```
/// use ratelimit_core::{Algorithm, Gcra};
/// use std::time::Duration;
///
/// let gcra = Gcra::new(3, Duration::from_secs(1)).unwrap();
/// let mut state = gcra.fresh("key", 0);
/// assert!(gcra.check(&mut state, 0, 3).allowed);
/// let denied = gcra.check(&mut state, 0, 1);
/// assert!(!denied.allowed);
/// assert_eq!(denied.wait, Some(Duration::from_nanos(333_333_334)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    interval: Interval,
    burst: u64,
    /// `B * T` in scaled units.
    capacity: u64,
    rate: u64,
    period: Duration,
}

impl Gcra {
    /// `limit` per `period`, burst `limit`.
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::with_burst(limit, period, limit)
    }

    /// `limit` per `period`, with a burst of `burst`.
    pub fn with_burst(limit: u64, period: Duration, burst: u64) -> Result<Self, ConfigError> {
        let limit = nonzero(limit, "limit")?;
        let period_ns = period_nanos(period)?;
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        let interval = Interval::new(limit, period_ns)?;
        let capacity = interval.span(burst, "burst * period / limit")?;
        Ok(Self {
            interval,
            burst,
            capacity,
            rate: limit,
            period,
        })
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        self.rate
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The burst `B`.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    fn decision(&self, allowed: bool, used: u64, wait: Option<u64>) -> Decision {
        let i = &self.interval;
        Decision {
            allowed,
            remaining: (self.capacity - used) / i.step,
            wait: wait.map(|w| Duration::from_nanos(i.nanos_ceil(w))),
            limit: self.burst,
            window: self.window(),
            reset: Duration::from_nanos(i.nanos_ceil(used)),
        }
    }
}

impl Algorithm for Gcra {
    type State = u64;

    fn fresh<K: Hash + ?Sized>(&self, _key: &K, now: u64) -> u64 {
        self.interval.units(now)
    }

    #[inline]
    fn check(&self, tat: &mut u64, now: u64, cost: u64) -> Decision {
        let t = self.interval.units(now);
        // How far max(TAT, t) is ahead of t; a state beyond the capacity
        // cannot be valid and counts as full.
        let used = u64::try_from(ahead(*tat, t))
            .ok()
            .filter(|a| *a <= self.capacity)
            .unwrap_or(0);
        if cost > self.burst {
            return self.decision(false, used, None);
        }
        let new = used + cost * self.interval.step;
        if new <= self.capacity {
            if cost > 0 {
                *tat = t.wrapping_add(new);
            }
            self.decision(true, new, Some(0))
        } else {
            self.decision(false, used, Some(new - self.capacity))
        }
    }

    fn refund(&self, tat: &mut u64, now: u64, _admitted_at: u64, cost: u64) {
        let t = self.interval.units(now);
        let used = u64::try_from(ahead(*tat, t))
            .unwrap_or(0)
            .min(self.capacity);
        let back = cost.min(self.burst) * self.interval.step;
        *tat = t.wrapping_add(used.saturating_sub(back));
    }

    #[inline]
    fn is_full(&self, tat: &u64, now: u64) -> bool {
        ahead(*tat, self.interval.units(now)) <= 0
    }

    fn idle_horizon(&self) -> u64 {
        self.interval.idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.burst
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.interval.nanos_ceil(self.capacity))
    }

    fn name(&self) -> &'static str {
        "gcra"
    }
}
