//! The outcome of a check, with every number a response needs.

use std::time::Duration;

/// What an algorithm decided for one request.
///
/// ```
/// use ratelimit_core::{Decision, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// let decision: Decision = store.check("alice", 1, 0).value().unwrap();
/// assert!(decision.allowed);
/// let denied = store.check("alice", 1, 0).value().unwrap();
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
///
/// Outside this crate, make one with [`Decision::new`]: fields may be
/// added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// The largest `k` such that `k` further requests of cost 1 at the same
    /// instant would all be admitted.
    pub remaining: u64,
    /// For a denial: the exact shortest time after which the same request
    /// would be admitted, rounded up to a whole nanosecond, or `None` when
    /// it can never be admitted (its cost exceeds the capacity). For an
    /// admission: how long to hold it before passing it on (non-zero only
    /// for the leaky bucket).
    pub wait: Option<Duration>,
    /// The capacity: how many cost units fit in [`window`](Self::window).
    pub limit: u64,
    /// The window the limit applies to (for a rate `L per P` with burst
    /// `B`, the time `B * P / L` to refill from empty).
    pub window: Duration,
    /// Time until the key's state is back to full (nothing used).
    pub reset: Duration,
    /// Time until a request of cost 1 would be admitted: zero when
    /// [`remaining`](Self::remaining) is positive, otherwise the exact wait
    /// (rounded up to a whole nanosecond) a cost-1 request denied at the
    /// same instant would be told.
    pub next: Duration,
    /// The key is banned (see [`BanPolicy`](crate::BanPolicy)): denied
    /// whatever the algorithm says until [`wait`](Self::wait) ends.
    pub banned: bool,
}

impl Decision {
    /// A decision with every field given, in declaration order.
    pub const fn new(
        allowed: bool,
        remaining: u64,
        wait: Option<Duration>,
        limit: u64,
        window: Duration,
        reset: Duration,
        next: Duration,
    ) -> Self {
        Self {
            allowed,
            remaining,
            wait,
            limit,
            window,
            reset,
            next,
            banned: false,
        }
    }

    /// The denial of a cost-1 check that may be admitted in `wait`, for a
    /// limit of `limit` per `window` that is full again in `reset`: nothing
    /// remains, and the wait for one more unit is `wait` too. The deny
    /// caches answer with it, and the fair queue refuses with it.
    ///
    /// ```
    /// use ratelimit_core::Decision;
    /// use std::time::Duration;
    ///
    /// let s = Duration::from_secs;
    /// let d = Decision::denied(5, s(60), s(30), s(12));
    /// assert!(!d.allowed && !d.banned);
    /// assert_eq!((d.remaining, d.wait, d.next), (0, Some(s(12)), s(12)));
    /// assert_eq!(d, Decision::new(false, 0, Some(s(12)), 5, s(60), s(30), s(12)));
    /// ```
    pub const fn denied(limit: u64, window: Duration, reset: Duration, wait: Duration) -> Self {
        Self::new(false, 0, Some(wait), limit, window, reset, wait)
    }

    /// The denial of a banned key with `left` of its ban to run, for a
    /// limit of `limit` per `window`.
    pub const fn ban(limit: u64, window: Duration, left: Duration) -> Self {
        Self {
            allowed: false,
            remaining: 0,
            wait: Some(left),
            limit,
            window,
            reset: left,
            next: left,
            banned: true,
        }
    }

    /// The time a denied client should wait before retrying: `Some` for a
    /// denial that can succeed later, `None` for an admission or a denial
    /// that never can.
    pub fn retry_after(&self) -> Option<Duration> {
        if self.allowed {
            None
        } else {
            self.wait
        }
    }

    /// The hold time of an admitted request (zero except for the leaky
    /// bucket).
    pub fn hold(&self) -> Duration {
        match (self.allowed, self.wait) {
            (true, Some(w)) => w,
            _ => Duration::ZERO,
        }
    }

    /// Whether the request was denied and can never be admitted.
    pub fn is_never(&self) -> bool {
        !self.allowed && self.wait.is_none()
    }
}
