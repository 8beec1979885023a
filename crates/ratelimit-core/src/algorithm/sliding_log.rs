//! The sliding log: every admitted request is logged for one period.

use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::collections::VecDeque;
use std::hash::Hash;
use std::time::Duration;

/// The default bound on a sliding log's limit, so a key's log stays under
/// 160 KiB.
pub const DEFAULT_MAX_LOG_ENTRIES: u64 = 10_000;

/// A sliding log's per-key state: the admitted `(time, cost)` entries of the
/// last period (requests at the same instant share one entry) and their sum.
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
/// assert!(log.check(&mut s, 0, 1).allowed);
/// assert!(log.check(&mut s, 4_000_000_000, 1).allowed);
/// let denied = log.check(&mut s, 5_000_000_000, 1);
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
            if at.saturating_add(self.period) > now {
                break;
            }
            s.used -= cost;
            s.log.pop_front();
        }
    }

    fn decision(&self, allowed: bool, s: &LogState, now: u64, wait: Option<u64>) -> Decision {
        let reset = s
            .log
            .back()
            .map_or(0, |&(at, _)| at.saturating_add(self.period) - now);
        Decision {
            allowed,
            remaining: self.limit - s.used,
            wait: wait.map(Duration::from_nanos),
            limit: self.limit,
            window: Duration::from_nanos(self.period),
            reset: Duration::from_nanos(reset),
        }
    }
}

impl Algorithm for SlidingLog {
    type State = LogState;

    fn fresh<K: Hash + ?Sized>(&self, _key: &K, _now: u64) -> LogState {
        LogState::default()
    }

    fn check(&self, s: &mut LogState, now: u64, cost: u64) -> Decision {
        self.expire(s, now);
        if cost == 0 {
            return self.decision(true, s, now, Some(0));
        }
        if cost > self.limit {
            return self.decision(false, s, now, None);
        }
        if s.used + cost <= self.limit {
            match s.log.back_mut() {
                Some((at, c)) if *at == now => *c += cost,
                _ => s.log.push_back((now, cost)),
            }
            s.used += cost;
            return self.decision(true, s, now, Some(0));
        }
        // Drop the oldest entries until the request fits.
        let mut freed = 0;
        let need = s.used + cost - self.limit;
        let mut wait = 0;
        for &(at, c) in &s.log {
            freed += c;
            if freed >= need {
                wait = at.saturating_add(self.period) - now;
                break;
            }
        }
        self.decision(false, s, now, Some(wait))
    }

    fn refund(&self, s: &mut LogState, now: u64, admitted_at: u64, cost: u64) {
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
        s.log
            .back()
            .is_none_or(|&(at, _)| at.saturating_add(self.period) <= now)
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
