//! The sliding window counter: the two-window approximation of the log.

use super::StableKey;
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::time::Duration;

/// A sliding window's per-key state: 24 bytes.
///
/// ```
/// use ratelimit_core::{Algorithm, SlidingWindow};
/// use std::time::Duration;
///
/// let window = SlidingWindow::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = window.fresh("key", 0); // a SlidingWindowState
/// assert!(window.check(&mut state, 2, 0).allowed);
/// assert!(!window.check(&mut state, 1, 0).allowed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowState {
    /// Index `k` of the current window `[k*P, (k+1)*P)`.
    window: u64,
    prev: u64,
    cur: u64,
}

/// The sliding-window counter: with `e` the time into the current aligned
/// window, the estimate is `prev * (P - e) / P + cur`; a request is admitted
/// iff `prev*(P - e) + (cur + n)*P <= L*P`, in integers.
///
/// ```
/// use ratelimit_core::{Algorithm, SlidingWindow};
/// use std::time::Duration;
///
/// let sw = SlidingWindow::new(10, Duration::from_secs(1)).unwrap();
/// let mut s = sw.fresh("key", 0);
/// assert!(sw.check(&mut s, 10, 900_000_000).allowed);
/// // Half into the next window, half of the previous one still counts.
/// assert_eq!(sw.check(&mut s, 0, 1_500_000_000).remaining, 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    limit: u64,
    period: u64,
}

impl SlidingWindow {
    /// `limit` per sliding `period`.
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Ok(Self {
            limit: nonzero(limit, "limit")?,
            period: period_nanos(period)?,
        })
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        self.limit
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    fn roll(&self, s: &mut SlidingWindowState, now: u64) {
        let k = now / self.period;
        if k != s.window {
            s.prev = if k == s.window + 1 { s.cur } else { 0 };
            s.cur = 0;
            s.window = k;
        }
    }

    /// `None` if a request of `cost` (at most `L`) fits at `now`, else
    /// how long until it does.
    fn wait(&self, s: &SlidingWindowState, now: u64, cost: u64) -> Option<u128> {
        let p = u128::from(self.period);
        let left = p - u128::from(now % self.period); // P - e
        let (l, prev, cur, n) = (
            u128::from(self.limit),
            u128::from(s.prev),
            u128::from(s.cur),
            u128::from(cost),
        );
        // prev*(P - e) + (cur + n)*P <= L*P, without overflowing u128
        // (cur + n may be near 2L).
        if cur + n <= l && prev * left <= (l - cur - n) * p {
            return None;
        }
        Some(if cur + n <= l {
            // Still this window: wait until prev*(P - e') <= room*P.
            let room = l - cur - n;
            left - room * p / prev
        } else {
            // The current window must become the previous one; then wait
            // until cur*(P - e'') <= (L - n)*P.
            left + p.saturating_sub((l - n) * p / cur)
        })
    }

    fn decision(
        &self,
        allowed: bool,
        s: &SlidingWindowState,
        now: u64,
        wait: Option<u128>,
    ) -> Decision {
        let p = u128::from(self.period);
        let left = p - u128::from(now % self.period); // P - e

        // floor(L - cur - prev*(P - e)/P), at least 0, computed as
        // floor(((L - cur)*P - prev*(P - e)) / P): both products fit in
        // u128 (cur <= L), where L*P alone may not fit in i128.
        // cur passes L after a live change to a smaller limit.
        let free = u128::from(self.limit.saturating_sub(s.cur)) * p;
        let used = u128::from(s.prev) * left;
        let remaining = u64::try_from(free.saturating_sub(used) / p).unwrap_or(u64::MAX);
        let reset = if s.cur > 0 {
            left + p
        } else if s.prev > 0 {
            left
        } else {
            0
        };
        Decision {
            banned: false,
            allowed,
            remaining,
            wait: wait.map(nanos),
            limit: self.limit,
            window: Duration::from_nanos(self.period),
            reset: nanos(reset),
            next: nanos(if remaining > 0 {
                0
            } else {
                self.wait(s, now, 1).unwrap_or(0)
            }),
        }
    }
}

impl Algorithm for SlidingWindow {
    type State = SlidingWindowState;

    fn fresh<K: StableKey + ?Sized>(&self, _key: &K, now: u64) -> SlidingWindowState {
        SlidingWindowState {
            window: now / self.period,
            prev: 0,
            cur: 0,
        }
    }

    fn check(&self, s: &mut SlidingWindowState, cost: u64, now: u64) -> Decision {
        self.roll(s, now);
        if cost == 0 {
            return self.decision(true, s, now, Some(0));
        }
        if cost > self.limit {
            return self.decision(false, s, now, None);
        }
        match self.wait(s, now, cost) {
            None => {
                s.cur += cost;
                self.decision(true, s, now, Some(0))
            }
            Some(wait) => self.decision(false, s, now, Some(wait)),
        }
    }

    /// Adds `cost` to the current window's count whatever is left: while
    /// the estimate passes the limit the key is denied; the debt ages out
    /// as the window slides (the count weighs less as it becomes the
    /// previous window's, and nothing after two periods). A key owes at
    /// most its limit: the current count is capped at `2 * L` (or at what
    /// it already is, if more).
    fn charge(&self, s: &mut SlidingWindowState, cost: u64, now: u64) -> Decision {
        self.roll(s, now);
        let cap = self.limit.saturating_mul(2).max(s.cur);
        s.cur = s.cur.saturating_add(cost).min(cap);
        // A cost-0 request waits only while the estimate passes the limit.
        let debt = self.wait(s, now, 0);
        self.decision(debt.is_none(), s, now, Some(debt.unwrap_or(0)))
    }

    fn refund(&self, s: &mut SlidingWindowState, cost: u64, admitted_at: u64, now: u64) {
        self.roll(s, now);
        let k = admitted_at / self.period;
        if k == s.window {
            s.cur = s.cur.saturating_sub(cost);
        } else if k + 1 == s.window {
            s.prev = s.prev.saturating_sub(cost);
        }
    }

    fn is_full(&self, s: &SlidingWindowState, now: u64) -> bool {
        let k = now / self.period;
        k >= s.window + 2 || (s.cur == 0 && (k > s.window || s.prev == 0))
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    fn name(&self) -> &'static str {
        "sliding-window"
    }
}

/// Nanoseconds as a duration; waits here can pass `u64` nanoseconds.
fn nanos(n: u128) -> Duration {
    const PER_SEC: u128 = 1_000_000_000;
    Duration::new((n / PER_SEC) as u64, (n % PER_SEC) as u32)
}

#[cfg(feature = "live")]
impl SlidingWindow {
    /// `s`, a state of `old`, under these settings at `now`. With the same
    /// period the counts are kept (beyond the new limit if so); with
    /// another, the old estimate at `now` (rounded up) becomes the count
    /// of the new window holding `now`.
    pub(crate) fn carry_from(
        &self,
        old: &SlidingWindow,
        mut s: SlidingWindowState,
        now: u64,
    ) -> SlidingWindowState {
        old.roll(&mut s, now);
        if old.period == self.period {
            return s;
        }
        self.charged(old.used_at(s, now), now)
    }

    /// The estimate of `s` at `now`, rounded up: the quota used, in
    /// requests (beyond the limit for an overshoot).
    pub(crate) fn used_at(&self, mut s: SlidingWindowState, now: u64) -> u64 {
        self.roll(&mut s, now);
        let p = u128::from(self.period);
        let left = p - u128::from(now % self.period);
        let estimate = (u128::from(s.prev) * left + u128::from(s.cur) * p).div_ceil(p);
        u64::try_from(estimate).unwrap_or(u64::MAX)
    }

    /// A state with `used` charged at `now`, as the count of the window
    /// holding `now`.
    pub(crate) fn charged(&self, used: u64, now: u64) -> SlidingWindowState {
        SlidingWindowState {
            window: now / self.period,
            prev: 0,
            cur: used,
        }
    }
}
