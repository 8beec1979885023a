//! The fixed window: at most `L` per window of length `P`.

use super::{nonzero, period_nanos, stable_hash, Algorithm};
use crate::{ConfigError, Decision};
use std::hash::Hash;
use std::time::Duration;

/// Where a fixed window starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anchor {
    /// Windows `[k*P, (k+1)*P)` counted from time 0 (the default).
    #[default]
    Aligned,
    /// A window opens at the first admitted request after the previous
    /// window ended, and lasts `P`.
    FirstRequest,
    /// Windows `[k*P + o, (k+1)*P + o)`, where the offset `o` in `[0, P)` is
    /// derived from the key by [`stable_hash`]. Keys' windows then end at
    /// different instants, so their clients don't all come back at once;
    /// every instance of a fleet derives the same offset.
    KeyOffset,
}

/// A fixed window's per-key state: 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    /// End of the current window, in nanoseconds.
    end: u64,
    /// Admitted cost in the current window.
    count: u64,
}

/// The fixed-window counter: admits iff `count + n <= L` in the current
/// window.
///
/// ```
/// use ratelimit_core::{Algorithm, Anchor, FixedWindow};
/// use std::time::Duration;
///
/// let daily = FixedWindow::new(200, Duration::from_secs(86_400)).unwrap();
/// let mut s = daily.fresh("key", 0);
/// assert_eq!(daily.check(&mut s, 0, 200).remaining, 0);
/// assert!(!daily.check(&mut s, 1, 1).allowed);
/// let spread = daily.with_anchor(Anchor::KeyOffset);
/// # let _ = spread;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    period: u64,
    anchor: Anchor,
}

impl FixedWindow {
    /// `limit` per aligned window of `period`.
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Ok(Self {
            limit: nonzero(limit, "limit")?,
            period: period_nanos(period)?,
            anchor: Anchor::Aligned,
        })
    }

    /// The same limit with windows anchored as `anchor` says.
    pub fn with_anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = anchor;
        self
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        self.limit
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The anchor.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }

    /// The first window end after `now` for windows of phase `offset`.
    fn next_end(&self, now: u64, offset: u64) -> u64 {
        let p = u128::from(self.period);
        let now = u128::from(now);
        let pos = (now + p - u128::from(offset)) % p;
        u64::try_from(now - pos + p).unwrap_or(u64::MAX)
    }

    /// Closes the window if it has ended; aligned windows move on in phase.
    fn roll(&self, s: &mut WindowState, now: u64) {
        if now >= s.end {
            s.count = 0;
            if self.anchor != Anchor::FirstRequest {
                let phase = s.end % self.period;
                s.end = self.next_end(now, phase);
            }
        }
    }

    fn decision(&self, allowed: bool, s: &WindowState, now: u64, wait: Option<u64>) -> Decision {
        Decision {
            allowed,
            remaining: self.limit - s.count,
            wait: wait.map(Duration::from_nanos),
            limit: self.limit,
            window: Duration::from_nanos(self.period),
            reset: Duration::from_nanos(if s.count > 0 { s.end - now } else { 0 }),
        }
    }
}

impl Algorithm for FixedWindow {
    type State = WindowState;

    fn fresh<K: Hash + ?Sized>(&self, key: &K, now: u64) -> WindowState {
        let end = match self.anchor {
            Anchor::Aligned => self.next_end(now, 0),
            Anchor::FirstRequest => 0,
            Anchor::KeyOffset => self.next_end(now, stable_hash(key) % self.period),
        };
        WindowState { end, count: 0 }
    }

    fn check(&self, s: &mut WindowState, now: u64, cost: u64) -> Decision {
        self.roll(s, now);
        if cost == 0 {
            return self.decision(true, s, now, Some(0));
        }
        if cost > self.limit {
            return self.decision(false, s, now, None);
        }
        if s.count + cost <= self.limit {
            if now >= s.end {
                // First request: the window opens now.
                s.end = now.saturating_add(self.period);
            }
            s.count += cost;
            self.decision(true, s, now, Some(0))
        } else {
            self.decision(false, s, now, Some(s.end - now))
        }
    }

    fn refund(&self, s: &mut WindowState, now: u64, admitted_at: u64, cost: u64) {
        self.roll(s, now);
        if admitted_at < s.end && admitted_at.saturating_add(self.period) >= s.end {
            s.count = s.count.saturating_sub(cost);
        }
    }

    fn is_full(&self, s: &WindowState, now: u64) -> bool {
        s.count == 0 || now >= s.end
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    fn name(&self) -> &'static str {
        "fixed-window"
    }
}
