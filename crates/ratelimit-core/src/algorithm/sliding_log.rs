//! The sliding log: every admitted request is logged for one period.

use super::StableKey;
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::collections::VecDeque;
use std::time::Duration;

/// The default bound on a sliding log's limit, so a key's log stays under
/// 160 KiB.
pub const DEFAULT_MAX_LOG_ENTRIES: u64 = 10_000;

/// A sliding log's per-key state: the admitted `(time, cost)` entries of the
/// last period (requests at the same instant share one entry) and their sum.
///
/// ```
/// use ratelimit_core::{Algorithm, SlidingLog};
/// use std::time::Duration;
///
/// let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = log.fresh("key", 0); // a LogState
/// assert!(log.check(&mut state, 1, 0).allowed);
/// assert!(log.check(&mut state, 1, 0).allowed);
/// assert!(!log.check(&mut state, 1, 500_000_000).allowed);
/// ```
///
/// Memory is O(limit) per key by nature: 40 bytes plus 16 bytes per entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogState {
    log: VecDeque<(u64, u64)>,
    used: u64,
}

/// The exact sliding log: an entry at `s` counts at `t` iff `s > t - P`;
/// admits iff the counted cost plus `n` is at most `L`.
///
/// ```
/// use ratelimit_core::{Algorithm, SlidingLog};
/// use std::time::Duration;
///
/// let log = SlidingLog::new(2, Duration::from_secs(10)).unwrap();
/// let mut s = log.fresh("key", 0);
/// assert!(log.check(&mut s, 1, 0).allowed);
/// assert!(log.check(&mut s, 1, 4_000_000_000).allowed);
/// let denied = log.check(&mut s, 1, 5_000_000_000);
/// assert_eq!(denied.wait, Some(Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    period: u64,
}

impl SlidingLog {
    /// `limit` per sliding `period`; `limit` may be at most
    /// [`DEFAULT_MAX_LOG_ENTRIES`].
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::with_max_entries(limit, period, DEFAULT_MAX_LOG_ENTRIES)
    }

    /// `limit` per sliding `period`, with `limit` at most `max_entries`.
    pub fn with_max_entries(
        limit: u64,
        period: Duration,
        max_entries: u64,
    ) -> Result<Self, ConfigError> {
        let limit = nonzero(limit, "limit")?;
        if limit > max_entries {
            return Err(ConfigError::LogTooLong {
                limit,
                max: max_entries,
            });
        }
        Ok(Self {
            limit,
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

    fn expire(&self, s: &mut LogState, now: u64) {
        while let Some(&(at, cost)) = s.log.front() {
            if self.counts(at, now) {
                break;
            }
            s.used -= cost;
            s.log.pop_front();
        }
    }

    /// Whether an entry logged at `at` still counts at `now`: `at > now - P`,
    /// i.e. `at + P > now` (a saturated `at + P` would expire an entry at
    /// `now = u64::MAX` one nanosecond early).
    #[inline]
    fn counts(&self, at: u64, now: u64) -> bool {
        now - at < self.period
    }

    /// How long until the entry logged at `at` stops counting: `at + P - now`,
    /// which may pass `u64` nanoseconds.
    fn until_expiry(&self, at: u64, now: u64) -> Duration {
        let ns = u128::from(at) + u128::from(self.period) - u128::from(now);
        Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
    }

    /// How long until the oldest entries that expire first free `need`
    /// units (at most the log's sum).
    fn until_freed(&self, s: &LogState, need: u64, now: u64) -> Duration {
        let mut freed = 0;
        for &(at, c) in &s.log {
            freed += c;
            if freed >= need {
                return self.until_expiry(at, now);
            }
        }
        Duration::ZERO
    }

    fn decision(&self, allowed: bool, s: &LogState, now: u64, wait: Option<Duration>) -> Decision {
        let reset = s
            .log
            .back()
            .map_or(Duration::ZERO, |&(at, _)| self.until_expiry(at, now));
        // Full: one unit comes back when enough of the oldest entries
        // expire (one, unless a live change left the log over the limit).
        let next = if s.used >= self.limit {
            self.until_freed(s, s.used - self.limit + 1, now)
        } else {
            Duration::ZERO
        };
        Decision {
            banned: false,
            allowed,
            remaining: self.limit.saturating_sub(s.used),
            wait,
            limit: self.limit,
            window: Duration::from_nanos(self.period),
            reset,
            next,
        }
    }
}

impl Algorithm for SlidingLog {
    type State = LogState;

    fn fresh<K: StableKey + ?Sized>(&self, _key: &K, _now: u64) -> LogState {
        LogState::default()
    }

    fn check(&self, s: &mut LogState, cost: u64, now: u64) -> Decision {
        self.expire(s, now);
        if cost == 0 {
            return self.decision(true, s, now, Some(Duration::ZERO));
        }
        if cost > self.limit {
            return self.decision(false, s, now, None);
        }
        // `used + cost` may pass u64::MAX when the limit is near it.
        if cost <= self.limit.saturating_sub(s.used) {
            match s.log.back_mut() {
                Some((at, c)) if *at == now => *c += cost,
                _ => s.log.push_back((now, cost)),
            }
            s.used += cost;
            return self.decision(true, s, now, Some(Duration::ZERO));
        }
        // Denied: the used cost passes `L - cost`, by `need`.
        let need = s.used - (self.limit - cost);
        let wait = self.until_freed(s, need, now);
        self.decision(false, s, now, Some(wait))
    }

    /// Logs `cost` at `now` whatever is left: while the logged cost passes
    /// the limit the key is denied, until enough entries age out. The log
    /// stays bounded: once it holds `limit` entries, a charge merges into
    /// the newest entry, moved to `now` (its cost then counts until
    /// `now + P`, later than logged: it errs toward denying), so it never
    /// holds more than `limit` entries. A key owes at most its limit: the
    /// logged sum is capped at `2 * L` (or at what it already is, if more).
    fn charge(&self, s: &mut LogState, cost: u64, now: u64) -> Decision {
        self.expire(s, now);
        let cap = self.limit.saturating_mul(2).max(s.used);
        let cost = cost.min(cap - s.used);
        if cost > 0 {
            let full = s.log.len() as u64 >= self.limit;
            match s.log.back_mut() {
                Some((at, c)) if *at == now || full => {
                    *at = now;
                    *c += cost;
                }
                _ => s.log.push_back((now, cost)),
            }
            s.used += cost;
        }
        let debt = s.used > self.limit;
        let wait = if debt {
            self.until_freed(s, s.used - self.limit, now)
        } else {
            Duration::ZERO
        };
        self.decision(!debt, s, now, Some(wait))
    }

    fn refund(&self, s: &mut LogState, cost: u64, admitted_at: u64, now: u64) {
        self.expire(s, now);
        if let Some(i) = s.log.iter().rposition(|&(at, _)| at == admitted_at) {
            let back = cost.min(s.log[i].1);
            s.log[i].1 -= back;
            s.used -= back;
            if s.log[i].1 == 0 {
                s.log.remove(i);
            }
        }
    }

    fn is_full(&self, s: &LogState, now: u64) -> bool {
        s.log.back().is_none_or(|&(at, _)| !self.counts(at, now))
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    fn name(&self) -> &'static str {
        "sliding-log"
    }
}

#[cfg(feature = "live")]
impl SlidingLog {
    /// `s`, a state of `old`, under these settings at `now`: every entry
    /// that counts under `old` at `now` still counts, beyond the new
    /// limit if so (the overshoot is kept, and the log stays as long as
    /// the old settings let it grow). Those a shorter new period would
    /// drop at once are merged into one entry at the earliest instant the
    /// new period still counts at `now`, `now - P' + 1`: the change frees
    /// nothing, and a later change back to a longer period finds them.
    pub(crate) fn carry_from(&self, old: &SlidingLog, mut s: LogState, now: u64) -> LogState {
        old.expire(&mut s, now);
        let mut early = 0;
        while let Some(&(at, cost)) = s.log.front() {
            if self.counts(at, now) {
                break;
            }
            early += cost;
            s.log.pop_front();
        }
        if early > 0 {
            s.log.push_front((now - self.period + 1, early));
        }
        s
    }

    /// The cost of the entries of `s` that count at `now`: the quota used,
    /// in requests (beyond the limit for an overshoot).
    pub(crate) fn used_at(&self, mut s: LogState, now: u64) -> u64 {
        self.expire(&mut s, now);
        s.used
    }

    /// A log with `used` charged at `now`, in one entry.
    pub(crate) fn charged(used: u64, now: u64) -> LogState {
        let mut s = LogState::default();
        if used > 0 {
            s.log.push_back((now, used));
            s.used = used;
        }
        s
    }
}
