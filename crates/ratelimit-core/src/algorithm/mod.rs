//! The six algorithms of the contract, behind one [`Algorithm`] trait: the
//! algorithms are at the crate root, and this module holds their options
//! ([`Anchor`], [`CalendarUnit`]), their per-key states, the state widths,
//! and the stable hash of a key ([`StableKey`]).
//!
//! ```
//! use ratelimit_core::algorithm::{Anchor, CalendarUnit};
//! use ratelimit_core::FixedWindow;
//!
//! let monthly = FixedWindow::per_calendar_unit(1000, CalendarUnit::Month).unwrap();
//! assert_eq!(monthly.anchor(), Anchor::Aligned);
//! ```
//!
//! Every algorithm is exact: times are integer nanoseconds, the emission
//! interval `T = P / L` is kept as an exact fraction (time is scaled by the
//! fraction's denominator), and waits are rounded up to the next whole
//! nanosecond only when they are reported. Only admitted cost changes state.
//!
//! GCRA, the token bucket and the leaky bucket keep that scaled time in a
//! state word, `u64` by default (8 bytes per key) or `u128` (16 bytes per
//! key, for settings too wide for 8 bytes): see [`StateWord`], and
//! [`AnyGcra`], [`AnyTokenBucket`] and [`AnyLeakyBucket`], which pick the
//! width a setting needs.

pub(crate) mod any;
mod any_width;
mod calendar;
#[cfg(feature = "live")]
mod carry;
mod divisor;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
mod interval;
pub(crate) mod leaky_bucket;
#[cfg(feature = "live")]
pub(crate) mod live;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod spec;
mod stable_hash;
pub(crate) mod token_bucket;

pub use any::AnyState;
pub use any_width::{AnyGcra, AnyLeakyBucket, AnyTokenBucket};
pub use calendar::CalendarUnit;
pub use fixed_window::{Anchor, WindowState};
pub use interval::StateWord;
#[cfg(feature = "live")]
pub use live::{LiveError, LiveState, MAX_OVERRIDES};
pub use sliding_log::{LogState, DEFAULT_MAX_LOG_ENTRIES};
pub use sliding_window::SlidingWindowState;
pub use stable_hash::{stable_hash, StableHasher, StableKey};

use crate::Decision;
use std::time::Duration;

/// A rate-limiting algorithm: it decides, given one key's state, the cost
/// and the time. It owns no keys and reads no clock; a store keeps the state
/// per key and makes each check atomic.
///
/// ```
/// use ratelimit_core::{Algorithm, Gcra};
/// use std::time::Duration;
///
/// let gcra = Gcra::new(2, Duration::from_secs(1)).unwrap();
/// let mut state = gcra.fresh("key", 0);
/// assert!(gcra.check(&mut state, 2, 0).allowed);
/// assert!(!gcra.check(&mut state, 1, 0).allowed);
/// ```
///
/// Times are nanoseconds since the clock's origin and never decrease for a
/// key. Arguments come in one order here and in [`Store`](crate::Store):
/// the state (or key), the cost, then times, `now` last.
pub trait Algorithm: Send + Sync + 'static {
    /// The per-key state.
    type State: Send + Sync + 'static;

    /// The state of a key seen for the first time at `now`: full, as if
    /// absent. `key` matters only to per-key window offsets.
    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> Self::State;

    /// Decides a request of `cost` at `now`, updating `state` only if it is
    /// admitted with a positive cost.
    fn check(&self, state: &mut Self::State, cost: u64, now: u64) -> Decision;

    /// The state of a key at `now` that has `used` whole requests of its
    /// quota taken: what a store gives a key that returns after it was
    /// evicted at the cap, so eviction gives nothing back. It must be at
    /// least as used as any state of this key that reported `used` as
    /// `limit - remaining` up to now. The default charges `used` (at most
    /// the key's capacity) to a fresh state at `now`, which never frees
    /// anything earlier than the evicted state would have.
    fn restore<K: StableKey + ?Sized>(&self, key: &K, used: u64, now: u64) -> Self::State {
        let mut state = self.fresh(key, now);
        // A peek tells this key's capacity (an override's, for live
        // settings); a charge up to it is always admitted by a full state.
        let limit = self.check(&mut state, 0, now).limit;
        self.check(&mut state, used.min(limit), now);
        state
    }

    /// The quota `state` has used at `now`, in whole requests: what a
    /// store keeps of a key it evicts. The default is what a peek tells,
    /// `limit - remaining`; an algorithm whose state can be over its limit
    /// (`LiveAlgorithm`, after a change to a smaller one) counts the
    /// overshoot too, so that [`restore`](Self::restore) gives it back.
    fn used(&self, state: &mut Self::State, now: u64) -> u64 {
        let peek = self.check(state, 0, now);
        peek.limit.saturating_sub(peek.remaining)
    }

    /// Charges `cost` at `now` whatever is left: the settlement of a cost
    /// known only after the request (see "Settlement and debt" in
    /// `docs/ALGORITHMS.md`). An algorithm that can take debt lets the
    /// state go past its capacity: later checks are denied until the debt
    /// is repaid at the refill rate, and their `wait` (`retry_after`) and
    /// `reset` count it. Debt is bounded per algorithm (its docs say how),
    /// so memory per key stays bounded.
    ///
    /// Returns what a peek (a check of cost 0) at `now` tells after the
    /// charge: `allowed` is false exactly when the key is in debt, and
    /// `wait` is then the time until the debt is repaid; `next` is the
    /// time until a cost-1 request fits.
    ///
    /// The default, for an algorithm that cannot take debt, charges what
    /// fits (`cost`, or what is left if less): the key is left empty,
    /// never in debt.
    fn charge(&self, state: &mut Self::State, cost: u64, now: u64) -> Decision {
        let left = self.check(state, 0, now).remaining;
        self.check(state, cost.min(left), now);
        self.check(state, 0, now)
    }

    /// Gives back `cost` admitted at `admitted_at`, as far as the state can
    /// still tell (a window that has ended has nothing to give back).
    fn refund(&self, state: &mut Self::State, cost: u64, admitted_at: u64, now: u64);

    /// Whether `state` is back to full at `now`: it then carries no
    /// information and can be dropped without changing any decision.
    fn is_full(&self, state: &Self::State, now: u64) -> bool;

    /// How long, in nanoseconds, a state may sit untouched before a store
    /// must drop it or sweep it (see [`MemoryStore`](crate::MemoryStore)).
    /// `u64::MAX` means it never has to.
    fn idle_horizon(&self) -> u64 {
        u64::MAX
    }

    /// Whether a store may answer a denied key from memory until the
    /// instant it would be admitted (the memory store's deny cache). True
    /// unless the algorithm can change under its states
    /// (`LiveAlgorithm`, feature `live`).
    fn caches_denials(&self) -> bool {
        true
    }

    /// Whether [`check_denied`](Self::check_denied) can tell a denial
    /// (false by default: a store then always decides with `check`).
    fn denies_read_only(&self) -> bool {
        false
    }

    /// The decision of a check of `cost` at `now` when it is a denial,
    /// which writes nothing to `state`: exactly what [`check`](Self::check)
    /// would return. `None` when the check would be admitted (or when the
    /// algorithm cannot tell without writing).
    fn check_denied(&self, state: &Self::State, cost: u64, now: u64) -> Option<Decision> {
        let _ = (state, cost, now);
        None
    }

    /// The capacity reported in [`Decision::limit`].
    fn limit(&self) -> u64;

    /// The window reported in [`Decision::window`].
    fn window(&self) -> Duration;

    /// The algorithm's name in the contract (`gcra`, `token-bucket`, ...).
    fn name(&self) -> &'static str;
}

pub(crate) fn period_nanos(period: Duration) -> Result<u64, crate::ConfigError> {
    if period.is_zero() {
        return Err(crate::ConfigError::ZeroPeriod);
    }
    u64::try_from(period.as_nanos()).map_err(|_| crate::ConfigError::PeriodTooLong(period))
}

pub(crate) fn nonzero(value: u64, what: &'static str) -> Result<u64, crate::ConfigError> {
    if value == 0 {
        Err(crate::ConfigError::ZeroLimit(what))
    } else {
        Ok(value)
    }
}
