//! The leaky bucket as a queue: requests leave one every `T = P / L`, and
//! up to `Q` may wait.

use super::interval::{ahead, Interval};
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::hash::Hash;
use std::time::Duration;

/// A leaky bucket used as a queue (a shaper): requests leave first in,
/// first out, one every `T = P / L`, and up to `queue` may wait. A request
/// of cost `n` takes `n` consecutive departure slots, and is admitted with
/// the time to hold it ([`Decision::hold`]) before it goes on.
///
/// With `queue = 0` it is a strict pacer: one request per `T`, none held.
///
/// State: 8 bytes per key (the scaled departure time of the last admitted
/// slot, stored modulo 2^64).
///
/// ```
/// use ratelimit_core::{Algorithm, LeakyBucket};
/// use std::time::Duration;
///
/// let bucket = LeakyBucket::new(2, Duration::from_secs(1), 1).unwrap();
/// let mut s = bucket.fresh("key", 0);
/// assert_eq!(bucket.check(&mut s, 0, 1).hold(), Duration::ZERO);
/// assert_eq!(bucket.check(&mut s, 0, 1).hold(), Duration::from_millis(500));
/// assert!(!bucket.check(&mut s, 0, 1).allowed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    interval: Interval,
    queue: u64,
    /// `Q * T` in scaled units.
    queue_span: u64,
    limit: u64,
    period: Duration,
}

impl LeakyBucket {
    /// `limit` departures per `period`, with up to `queue` waiting.
    pub fn new(limit: u64, period: Duration, queue: u64) -> Result<Self, ConfigError> {
        let limit = nonzero(limit, "limit")?;
        let period_ns = period_nanos(period)?;
        let interval = Interval::new(limit, period_ns)?;
        let queue_span = interval.span(queue, "queue * period / limit")?;
        // The state may sit up to (Q + 2) * T from now; keep that in range.
        interval.span(
            queue.checked_add(2).ok_or(ConfigError::Overflow("queue"))?,
            "queue * period / limit",
        )?;
        Ok(Self {
            interval,
            queue,
            queue_span,
            limit,
            period,
        })
    }

    /// The departures per period `L`.
    pub fn rate_limit(&self) -> u64 {
        self.limit
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The queue length `Q`.
    pub fn queue(&self) -> u64 {
        self.queue
    }

    /// `d* - t`, in `[-T, Q*T]`.
    #[inline]
    fn last_departure(&self, state: u64, t: u64) -> i64 {
        let step = self.interval.step as i64;
        let d = ahead(state, t);
        if d > self.queue_span as i64 {
            -step
        } else {
            d.max(-step)
        }
    }

    fn decision(&self, allowed: bool, last: i64, wait: Option<u64>) -> Decision {
        let i = &self.interval;
        // last + T is in [0, (Q + 1) * T].
        let drained = (last + i.step as i64) as u64;
        Decision {
            allowed,
            remaining: (self.queue_span + i.step - drained) / i.step,
            wait: wait.map(|w| Duration::from_nanos(i.nanos_ceil(w))),
            limit: self.queue + 1,
            window: self.window(),
            reset: Duration::from_nanos(i.nanos_ceil(drained)),
        }
    }
}

impl Algorithm for LeakyBucket {
    type State = u64;

    fn fresh<K: Hash + ?Sized>(&self, _key: &K, now: u64) -> u64 {
        self.interval.units(now).wrapping_sub(self.interval.step)
    }

    fn check(&self, state: &mut u64, now: u64, cost: u64) -> Decision {
        let t = self.interval.units(now);
        let step = self.interval.step;
        let d = self.last_departure(*state, t);
        if cost == 0 {
            return self.decision(true, d, Some(0));
        }
        if cost - 1 > self.queue {
            return self.decision(false, d, None);
        }
        // start = d + T >= 0; last = start + (n - 1) * T.
        let start = (d + step as i64) as u64;
        let last = start + (cost - 1) * step;
        if last <= self.queue_span {
            *state = t.wrapping_add(last);
            self.decision(true, last as i64, Some(start))
        } else {
            self.decision(false, d, Some(last - self.queue_span))
        }
    }

    fn refund(&self, state: &mut u64, now: u64, _admitted_at: u64, cost: u64) {
        let t = self.interval.units(now);
        let step = self.interval.step as i64;
        let d = self.last_departure(*state, t);
        let back = cost.min(self.queue + 1) as i64 * step;
        *state = t.wrapping_add((d - back).max(-step) as u64);
    }

    fn is_full(&self, state: &u64, now: u64) -> bool {
        ahead(*state, self.interval.units(now)) <= -(self.interval.step as i64)
    }

    fn idle_horizon(&self) -> u64 {
        self.interval.idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.queue + 1
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(
            self.interval
                .nanos_ceil(self.queue_span + self.interval.step),
        )
    }

    fn name(&self) -> &'static str {
        "leaky-bucket"
    }
}
