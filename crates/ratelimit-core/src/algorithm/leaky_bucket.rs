//! The leaky bucket as a queue: requests leave one every `T = P / L`, and
//! up to `Q` may wait.

use super::gcra::Names;
#[cfg(feature = "live")]
use super::interval::word::Word as _;
use super::interval::{ahead, Interval, Refusal, StateWord};
use super::StableKey;
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::time::Duration;

/// A leaky bucket used as a queue (a shaper): requests leave first in,
/// first out, one every `T = P / L`, and up to `queue` may wait. A request
/// of cost `n` takes `n` consecutive departure slots, and is admitted with
/// the time to hold it ([`Decision::hold`]) before it goes on.
///
/// ```
/// use ratelimit_core::{Algorithm, LeakyBucket};
/// use std::time::Duration;
///
/// let bucket = LeakyBucket::new(2, Duration::from_secs(1), 1).unwrap();
/// let mut s = bucket.fresh("key", 0);
/// assert_eq!(bucket.check(&mut s, 1, 0).hold(), Duration::ZERO);
/// assert_eq!(bucket.check(&mut s, 1, 0).hold(), Duration::from_millis(500));
/// assert!(!bucket.check(&mut s, 1, 0).allowed);
/// ```
///
/// With `queue = 0` it is a strict pacer: one request per `T`, none held.
///
/// It takes no debt: [`charge`](Algorithm::charge) (a settlement) fills
/// free departure slots up to the queue's end and no further (the
/// default). The queue is a shaper's promise that no admitted request is
/// held longer than `Q * T`; slots past its end would break it for every
/// request admitted after them.
///
/// State: the scaled departure time of the last admitted slot.
/// `LeakyBucket` (that is `LeakyBucket<u64>`) keeps it in 8 bytes per key,
/// modulo 2^64, and refuses settings where `(Q + 2) * T` passes 2^61 scaled
/// units with [`ConfigError::Overflow`]; `LeakyBucket<u128>`, built with
/// [`new_wide`](LeakyBucket::new_wide), keeps 16 bytes and holds up to
/// 2^125 units. See [`Gcra`](crate::Gcra)'s "State width", and
/// [`AnyLeakyBucket`](crate::algorithm::AnyLeakyBucket), which picks the width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket<W: StateWord = u64> {
    interval: Interval<W>,
    queue: u64,
    /// `Q * T` in scaled units.
    queue_span: W,
    /// `(Q + 1) * T` in scaled units: the window.
    full_span: W,
    limit: u64,
    period: Duration,
}

const NARROW: Names = [
    "limit / period for the 8-byte state of LeakyBucket (use LeakyBucket<u128>)",
    "queue * period / limit for the 8-byte state of LeakyBucket (use LeakyBucket<u128>)",
];
const WIDE: Names = ["limit / period", "queue * period / limit"];

impl LeakyBucket {
    /// `limit` departures per `period`, with up to `queue` waiting, with an
    /// 8-byte state.
    ///
    /// Fails with [`ConfigError::Overflow`] when the 8-byte state cannot
    /// hold the setting: use [`LeakyBucket::new_wide`] or
    /// [`AnyLeakyBucket`](crate::algorithm::AnyLeakyBucket).
    pub fn new(limit: u64, period: Duration, queue: u64) -> Result<Self, ConfigError> {
        Self::build(limit, period, queue, NARROW)
    }
}

impl LeakyBucket<u128> {
    /// `limit` departures per `period`, with up to `queue` waiting, with a
    /// 16-byte state.
    pub fn new_wide(limit: u64, period: Duration, queue: u64) -> Result<Self, ConfigError> {
        Self::build(limit, period, queue, WIDE)
    }
}

impl<W: StateWord> LeakyBucket<W> {
    fn build(limit: u64, period: Duration, queue: u64, names: Names) -> Result<Self, ConfigError> {
        let limit = nonzero(limit, "limit")?;
        let period_ns = period_nanos(period)?;
        let refused = |r: Refusal| match r {
            Refusal::Rate => ConfigError::Overflow(names[0]),
            Refusal::Span => ConfigError::Overflow(names[1]),
        };
        // `remaining` and `limit` go up to Q + 1.
        if queue == u64::MAX {
            return Err(ConfigError::Overflow("queue"));
        }
        let interval = Interval::<W>::new(limit, period_ns).map_err(refused)?;
        let q = W::from_u64(queue);
        let queue_span = interval.span(q).map_err(refused)?;
        // The state may sit up to (Q + 2) * T from now; keep that in range.
        let one = W::from_u64(1);
        q.checked_add(one + one)
            .ok_or(Refusal::Span)
            .and_then(|q2| interval.span(q2))
            .map_err(refused)?;
        let full_span = interval
            .reportable(queue_span + interval.step)
            .map_err(refused)?;
        Ok(Self {
            interval,
            queue,
            queue_span,
            full_span,
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

    /// `d* + T - t`: when the next free departure slot starts, from now,
    /// in `[0, (Q + 1) * T]`, or beyond for the overshoot a live change to
    /// a shorter queue keeps (`LiveAlgorithm`), denied until it drains. A
    /// state behind `t - T` (idle for less than the idle horizon,
    /// `2 * MAX_SPAN` units) reads as more than `MAX_SPAN` and counts as
    /// empty.
    #[inline]
    fn next_slot(&self, state: W, t: W) -> W {
        let x = state.wrapping_sub(t).wrapping_add(self.interval.step);
        if x <= W::MAX_SPAN {
            x
        } else {
            W::ZERO
        }
    }

    /// `drained` is `d*' + T - t`, in `[0, (Q + 1) * T]` (or beyond, for
    /// an overshoot).
    fn decision(&self, allowed: bool, drained: W, wait: Option<W>) -> Decision {
        let i = &self.interval;
        let free = if drained < self.full_span {
            self.full_span - drained
        } else {
            W::ZERO
        };
        Decision {
            banned: false,
            allowed,
            // At most Q + 1.
            remaining: i.steps(free).low_u64(),
            wait: wait.map(|w| i.duration_ceil(w)),
            limit: self.queue + 1,
            window: self.window(),
            reset: i.duration_ceil(drained),
            // A request of one fits when its slot starts within `Q * T`.
            next: if drained > self.queue_span {
                i.duration_ceil(drained - self.queue_span)
            } else {
                Duration::ZERO
            },
        }
    }
}

impl<W: StateWord> Algorithm for LeakyBucket<W> {
    /// The scaled departure time: `u64`, or for `LeakyBucket<u128>` a
    /// `u128` as `[low, high]`.
    type State = W::Stored;

    fn fresh<K: StableKey + ?Sized>(&self, _key: &K, now: u64) -> W::Stored {
        self.interval
            .units(now)
            .wrapping_sub(self.interval.step)
            .store()
    }

    fn check(&self, state: &mut W::Stored, cost: u64, now: u64) -> Decision {
        let t = self.interval.units(now);
        let step = self.interval.step;
        // start - t, with start = d* + T.
        let start = self.next_slot(W::load(*state), t);
        if cost == 0 {
            return self.decision(true, start, Some(W::ZERO));
        }
        if cost - 1 > self.queue {
            return self.decision(false, start, None);
        }
        // last - t = start - t + (n - 1) * T, at most (2Q + 1) * T.
        let last = start + W::from_u64(cost - 1) * step;
        if last <= self.queue_span {
            *state = t.wrapping_add(last).store();
            self.decision(true, last + step, Some(start))
        } else {
            self.decision(false, start, Some(last - self.queue_span))
        }
    }

    fn refund(&self, state: &mut W::Stored, cost: u64, _admitted_at: u64, now: u64) {
        let t = self.interval.units(now);
        let step = self.interval.step;
        let x = self.next_slot(W::load(*state), t);
        let back = W::from_u64(cost.min(self.queue + 1)) * step;
        let left = if x > back { x - back } else { W::ZERO };
        *state = t.wrapping_add(left).wrapping_sub(step).store();
    }

    fn is_full(&self, state: &W::Stored, now: u64) -> bool {
        ahead(W::load(*state), self.interval.units(now)) <= -self.interval.step.signed()
    }

    fn idle_horizon(&self) -> u64 {
        self.interval.idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.queue + 1
    }

    fn window(&self) -> Duration {
        self.interval.duration_ceil(self.full_span)
    }

    fn name(&self) -> &'static str {
        "leaky-bucket"
    }
}

#[cfg(feature = "live")]
impl LeakyBucket<u128> {
    /// When the next free departure slot starts, from `now`, in scaled
    /// units (the queue's length times `T`), and `T` in the same units.
    pub(crate) fn used(&self, state: &[u64; 2], now: u64) -> (u128, u128) {
        let t = self.interval.units(now);
        (self.next_slot(u128::load(*state), t), self.interval.step)
    }

    /// The state at `now` whose next free slot starts `used` scaled units
    /// from now, beyond the queue's span if so (the overshoot is kept;
    /// only past `MAX_SPAN`, 2^125 units, is it capped).
    pub(crate) fn with_used(&self, used: u128, now: u64) -> [u64; 2] {
        let t = self.interval.units(now);
        t.wrapping_add(used.min(u128::MAX_SPAN))
            .wrapping_sub(self.interval.step)
            .store()
    }

    /// `T` in scaled units.
    pub(crate) fn step(&self) -> u128 {
        self.interval.step
    }
}
