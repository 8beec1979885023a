//! The fixed window: at most `L` per window of length `P`, or per unit of
//! the UTC calendar.

use super::{nonzero, period_nanos, stable_hash, Algorithm, StableKey};
use crate::algorithm::CalendarUnit;
use crate::{ConfigError, Decision};
use std::time::Duration;

/// Where a fixed window starts.
///
/// ```
/// use ratelimit_core::{algorithm::Anchor, FixedWindow};
/// use std::time::Duration;
///
/// let window = FixedWindow::new(10, Duration::from_secs(60))
///     .unwrap()
///     .with_anchor(Anchor::KeyOffset)
///     .unwrap();
/// assert_eq!(window.anchor(), Anchor::KeyOffset);
/// ```
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
///
/// ```
/// use ratelimit_core::{Algorithm, FixedWindow};
/// use std::time::Duration;
///
/// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = window.fresh("key", 0); // a WindowState
/// assert!(window.check(&mut state, 2, 0).allowed);
/// assert!(!window.check(&mut state, 1, 0).allowed);
/// ```
///
/// It keeps the window's start rather than its end: the end `start + P` of
/// a window near the end of time may not fit in `u64` nanoseconds, and a
/// saturated end would close the window early and shorten its waits. The
/// start is stored modulo 2^64 (the first window of a key-offset anchor
/// starts before time 0), and only `now - start` is ever used; that is
/// exact for every aligned and first-request state, and for key-offset
/// states short of 584 years of idleness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    /// Start of the current window, in nanoseconds (mod 2^64).
    start: u64,
    /// Admitted cost in the current window; 0 means no window is open.
    count: u64,
}

/// The fixed-window counter: admits iff `count + n <= L` in the current
/// window.
///
/// ```
/// use ratelimit_core::{Algorithm, FixedWindow};
/// use ratelimit_core::algorithm::Anchor;
/// use std::time::Duration;
///
/// let daily = FixedWindow::new(200, Duration::from_secs(86_400)).unwrap();
/// let mut s = daily.fresh("key", 0);
/// assert_eq!(daily.check(&mut s, 200, 0).remaining, 0);
/// assert!(!daily.check(&mut s, 1, 1).allowed);
/// let spread = daily.with_anchor(Anchor::KeyOffset).unwrap();
/// # let _ = spread;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    /// `P` in ns; with a calendar unit, the unit's longest length.
    period: u64,
    anchor: Anchor,
    /// Windows that are the units of the UTC calendar.
    calendar: Option<CalendarUnit>,
}

impl FixedWindow {
    /// `limit` per aligned window of `period`.
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Ok(Self {
            limit: nonzero(limit, "limit")?,
            period: period_nanos(period)?,
            anchor: Anchor::Aligned,
            calendar: None,
        })
    }

    /// `limit` per unit of the UTC calendar: the window is the week (from
    /// Monday 00:00 UTC), month or year holding the instant, and the count
    /// resets at the start of the next one. Instants are nanoseconds since
    /// the Unix epoch (a [`SystemClock`](crate::SystemClock)'s).
    ///
    /// ```
    /// use ratelimit_core::{Algorithm, FixedWindow};
    /// use ratelimit_core::algorithm::CalendarUnit;
    ///
    /// const DAY: u64 = 86_400_000_000_000;
    /// let monthly = FixedWindow::per_calendar_unit(2, CalendarUnit::Month).unwrap();
    /// let jan_31 = 30 * DAY; // 1970-01-31 00:00 UTC
    /// let mut s = monthly.fresh("key", jan_31);
    /// let d = monthly.check(&mut s, 2, jan_31);
    /// assert_eq!(d.reset.as_secs(), 86_400); // February 1st
    /// ```
    pub fn per_calendar_unit(limit: u64, unit: CalendarUnit) -> Result<Self, ConfigError> {
        let mut w = Self::new(limit, unit.longest())?;
        w.calendar = Some(unit);
        Ok(w)
    }

    /// The same limit with windows anchored as `anchor` says. A calendar
    /// window ([`per_calendar_unit`](Self::per_calendar_unit)) is always
    /// aligned on the calendar: any other anchor fails, naming it.
    ///
    /// ```
    /// use ratelimit_core::algorithm::{Anchor, CalendarUnit};
    /// use ratelimit_core::FixedWindow;
    ///
    /// let monthly = FixedWindow::per_calendar_unit(100, CalendarUnit::Month).unwrap();
    /// assert!(monthly.with_anchor(Anchor::KeyOffset).is_err());
    /// assert!(monthly.with_anchor(Anchor::Aligned).is_ok());
    /// ```
    pub fn with_anchor(mut self, anchor: Anchor) -> Result<Self, ConfigError> {
        if let Some(unit) = self.calendar.filter(|_| anchor != Anchor::Aligned) {
            return Err(ConfigError::BadSetting(format!(
                "anchor {anchor:?} on a window per calendar {unit:?}: a calendar window is \
                 aligned on the calendar"
            )));
        }
        self.anchor = anchor;
        Ok(self)
    }

    /// The calendar unit of a calendar window, `None` for a window of
    /// fixed length.
    pub fn calendar_unit(&self) -> Option<CalendarUnit> {
        self.calendar
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        self.limit
    }

    /// The period `P`; with a calendar unit, its longest length (31 days
    /// for a month).
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The anchor.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }

    /// The start of the window holding `now`, for windows of phase
    /// `offset` (modulo 2^64: it is before time 0 when `now < offset`).
    fn window_start(&self, now: u64, offset: u64) -> u64 {
        let p = u128::from(self.period);
        // How far `now` is into its window, in [0, P).
        let pos = (u128::from(now) + p - u128::from(offset)) % p;
        now.wrapping_sub(pos as u64)
    }

    /// Time since the window's start.
    #[inline]
    fn elapsed(s: &WindowState, now: u64) -> u64 {
        now.wrapping_sub(s.start)
    }

    /// The length of the window starting at `start`: `P`, or the length
    /// of the calendar unit starting there (a week's start may be before
    /// time 0, a month's or a year's never).
    #[inline]
    fn length(&self, start: u64) -> u64 {
        match self.calendar {
            Some(unit @ (CalendarUnit::Month | CalendarUnit::Year)) => unit.window(start).1,
            _ => self.period,
        }
    }

    /// Time left in `s`'s window at `now` (which is in it).
    #[inline]
    fn left(&self, s: &WindowState, now: u64) -> u64 {
        self.length(s.start) - Self::elapsed(s, now)
    }

    /// Closes the window if it has ended; aligned windows move on in phase.
    fn roll(&self, s: &mut WindowState, now: u64) {
        let elapsed = Self::elapsed(s, now);
        if elapsed >= self.length(s.start) {
            s.count = 0;
            if let Some(unit) = self.calendar {
                s.start = unit.window(now).0;
            } else if self.anchor != Anchor::FirstRequest {
                // start + k*P for the largest k that is not after now.
                s.start = now - elapsed % self.period;
            }
        }
    }

    fn decision(&self, allowed: bool, s: &WindowState, now: u64, wait: Option<u64>) -> Decision {
        let reset = if s.count > 0 { self.left(s, now) } else { 0 };
        Decision {
            banned: false,
            allowed,
            // The count passes the limit after a live change to a smaller
            // one, which keeps the overshoot.
            remaining: self.limit.saturating_sub(s.count),
            wait: wait.map(Duration::from_nanos),
            limit: self.limit,
            // A calendar unit's longest length: the same for every window.
            window: Duration::from_nanos(self.period),
            reset: Duration::from_nanos(reset),
            // Full: nothing comes back before the window ends.
            next: Duration::from_nanos(if s.count < self.limit { 0 } else { reset }),
        }
    }
}

impl Algorithm for FixedWindow {
    type State = WindowState;

    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> WindowState {
        let hash = match self.anchor {
            Anchor::KeyOffset => stable_hash(key),
            _ => 0,
        };
        self.fresh_hashed(hash, now)
    }

    fn check(&self, s: &mut WindowState, cost: u64, now: u64) -> Decision {
        self.roll(s, now);
        if cost == 0 {
            return self.decision(true, s, now, Some(0));
        }
        if cost > self.limit {
            return self.decision(false, s, now, None);
        }
        // `count + cost` may pass u64::MAX when the limit is near it.
        if cost <= self.limit.saturating_sub(s.count) {
            if s.count == 0 && self.anchor == Anchor::FirstRequest {
                // The first admitted request opens the window.
                s.start = now;
            }
            s.count += cost;
            self.decision(true, s, now, Some(0))
        } else {
            // Denied with cost <= L, so count > 0: the window is open.
            let wait = self.left(s, now);
            self.decision(false, s, now, Some(wait))
        }
    }

    /// Adds `cost` to the current window's count whatever is left: past
    /// the limit the key is denied until the window ends. The debt ends
    /// with the window, as every count does at the boundary: a fixed
    /// window admits at most `L` plus what settlements overdraw, per window.
    /// A key owes at most its limit: the count is capped at `2 * L` (or at
    /// what it already is, if more).
    fn charge(&self, s: &mut WindowState, cost: u64, now: u64) -> Decision {
        self.roll(s, now);
        if cost > 0 {
            if s.count == 0 && self.anchor == Anchor::FirstRequest {
                s.start = now;
            }
            let cap = self.limit.saturating_mul(2).max(s.count);
            s.count = s.count.saturating_add(cost).min(cap);
        }
        let debt = s.count > self.limit;
        let wait = if debt { self.left(s, now) } else { 0 };
        self.decision(!debt, s, now, Some(wait))
    }

    fn refund(&self, s: &mut WindowState, cost: u64, admitted_at: u64, now: u64) {
        self.roll(s, now);
        if admitted_at <= now && admitted_at.wrapping_sub(s.start) < self.length(s.start) {
            s.count = s.count.saturating_sub(cost);
        }
    }

    fn is_full(&self, s: &WindowState, now: u64) -> bool {
        s.count == 0 || Self::elapsed(s, now) >= self.length(s.start)
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

impl FixedWindow {
    /// A fresh state for the key whose [`stable_hash`] is `hash`.
    pub(crate) fn fresh_hashed(&self, hash: u64, now: u64) -> WindowState {
        let start = match (self.calendar, self.anchor) {
            (Some(unit), _) => unit.window(now).0,
            (None, Anchor::Aligned) => self.window_start(now, 0),
            // No window is open until a request is admitted.
            (None, Anchor::FirstRequest) => now,
            (None, Anchor::KeyOffset) => self.window_start(now, hash % self.period),
        };
        WindowState { start, count: 0 }
    }

    /// `s`, a state of `old`, under these settings at `now`: the count of
    /// the window still open at `now` carries over whole (beyond the new
    /// limit if so) into the new window holding `now`; a first-request
    /// window keeps its start, or starts at `now` if the new period has
    /// passed since (so the count is never dropped by the change).
    #[cfg(feature = "live")]
    pub(crate) fn carry_from(
        &self,
        old: &FixedWindow,
        mut s: WindowState,
        hash: u64,
        now: u64,
    ) -> WindowState {
        old.roll(&mut s, now);
        let mut new = self.fresh_hashed(hash, now);
        if s.count == 0 {
            return new;
        }
        if self.anchor == Anchor::FirstRequest && Self::elapsed(&s, now) < self.period {
            new.start = s.start;
        }
        new.count = s.count;
        new
    }

    /// The count of the window open at `now` in `s`: the quota used, in
    /// requests (beyond the limit for an overshoot).
    #[cfg(feature = "live")]
    pub(crate) fn used_at(&self, mut s: WindowState, now: u64) -> u64 {
        self.roll(&mut s, now);
        s.count
    }

    /// A state with `used` charged at `now`, in the window holding `now`
    /// (a first-request window opens at `now`).
    #[cfg(feature = "live")]
    pub(crate) fn charged(&self, hash: u64, used: u64, now: u64) -> WindowState {
        let mut s = self.fresh_hashed(hash, now);
        s.count = used;
        s
    }
}
