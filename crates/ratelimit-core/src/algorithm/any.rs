//! One type for all six algorithms, chosen at run time.

use super::StableKey;
use super::{
    Algorithm, AnyGcra, AnyLeakyBucket, AnyTokenBucket, LogState, SlidingWindowState, WindowState,
};
use crate::Decision;
use crate::{FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};
use std::convert::identity;
use std::time::Duration;

/// Any of the six algorithms, for configuration chosen at run time (the sim,
/// config files). Prefer the concrete type when it is known: its state is
/// smaller.
///
/// GCRA, the token bucket and the leaky bucket come in either state width
/// ([`AnyGcra`], [`AnyTokenBucket`], [`AnyLeakyBucket`]): build them with
/// those types' constructors, which pick the 16-byte state only for
/// settings the 8-byte one cannot hold, so that every valid setting is
/// decided exactly.
///
/// ```
/// use ratelimit_core::{Algorithm, AnyAlgorithm, Gcra};
/// use ratelimit_core::algorithm::AnyGcra;
/// use std::time::Duration;
///
/// let day = Duration::from_secs(86_400);
/// let narrow: AnyAlgorithm = Gcra::new(5, day).unwrap().into();
/// let wide: AnyAlgorithm = AnyGcra::new(30_001, day).unwrap().into();
/// let mut state = wide.fresh("key", 0);
/// assert_eq!(wide.check(&mut state, 1, 0).remaining, 30_000);
/// assert_eq!((narrow.name(), wide.name()), ("gcra", "gcra"));
/// ```
///
/// # As text
///
/// `NAME RATE [OPTION VALUE]...`, words separated by white space, where
/// `RATE` is `L/P`: an integer and a duration (`100/1m`; `10/s` is
/// `10/1s`). Durations are an integer and a unit, one of `ns us ms s m h d`
/// (`m` is minutes). The fixed window also takes a unit of the UTC calendar
/// as its period, written `week`, `month` or `year` with no number
/// (`fixed-window 1000/month`; see [`CalendarUnit`](crate::algorithm::CalendarUnit)):
/// `1mo`, `1w`, `2month`, `years` are refused naming the word, and the other
/// algorithms refuse calendar periods naming themselves.
///
/// | algorithm | form | options |
/// |---|---|---|
/// | [`Gcra`](crate::Gcra) | `gcra L/P [burst B]` | `burst` defaults to `L` |
/// | [`TokenBucket`](crate::TokenBucket) | `token-bucket C refill R/P` | `C` the capacity, `R/P` the refill rate |
/// | [`LeakyBucket`](crate::LeakyBucket) | `leaky-bucket L/P [queue Q]` | `queue` defaults to 0 (a strict pacer) |
/// | [`FixedWindow`](crate::FixedWindow) | `fixed-window L/P [anchor A]` | `A`: `aligned` (default), `first-request`, `key-offset`; only `aligned` with `week`, `month`, `year` |
/// | [`SlidingLog`](crate::SlidingLog) | `sliding-log L/P [max-entries M]` | `M` the bound on `L`, default [`DEFAULT_MAX_LOG_ENTRIES`](crate::algorithm::DEFAULT_MAX_LOG_ENTRIES) |
/// | [`SlidingWindow`](crate::SlidingWindow) | `sliding-window L/P` | |
///
/// Options come in any order, each at most once. `Display` writes the
/// canonical form: options at their defaults left out, each duration in the
/// largest unit that holds it exactly. Parsing picks the state width as
/// [`AnyGcra::with_burst`] and the like do, so `parse(display(a)) == a` for
/// every algorithm built by those constructors (and by `parse`).
///
/// With the `serde` feature, `Serialize` writes the text form; `Deserialize` reads the text form or a
/// table whose `algorithm` field names the algorithm and whose other
/// fields are its settings, periods written as durations:
///
/// ```toml
/// login = "gcra 5/1m burst 2"
/// api = { algorithm = "token-bucket", capacity = 500, refill = 100, period = "1s" }
/// ```
///
/// | algorithm | fields |
/// |---|---|
/// | `gcra` | `limit`, `period`, `burst` (optional) |
/// | `token-bucket` | `capacity`, `refill`, `period` |
/// | `leaky-bucket` | `limit`, `period`, `queue` (optional) |
/// | `fixed-window` | `limit`, `period`, `anchor` (optional) |
/// | `sliding-log` | `limit`, `period`, `max-entries` (optional) |
/// | `sliding-window` | `limit`, `period` |
///
/// Unknown fields are errors.
///
/// ```
/// use ratelimit_core::{AnyAlgorithm, SpecError};
///
/// let a: AnyAlgorithm = "gcra 100/1m burst 20".parse().unwrap();
/// assert_eq!(a.to_string(), "gcra 100/1m burst 20");
/// let b: AnyAlgorithm = "fixed-window 200/24h anchor key-offset".parse().unwrap();
/// assert_eq!(b.to_string(), "fixed-window 200/1d anchor key-offset");
/// let bad = "gcra 100/1m brust 20".parse::<AnyAlgorithm>().unwrap_err();
/// assert_eq!(bad, SpecError::UnknownOption { algorithm: "gcra", token: "brust".into() });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyAlgorithm {
    /// [`Gcra`], in either state width.
    Gcra(AnyGcra),
    /// [`TokenBucket`], in either state width.
    TokenBucket(AnyTokenBucket),
    /// [`LeakyBucket`], in either state width.
    LeakyBucket(AnyLeakyBucket),
    /// [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
}

/// The state of an [`AnyAlgorithm`] key.
///
/// ```
/// use ratelimit_core::{Algorithm, AnyAlgorithm};
///
/// let any: AnyAlgorithm = "fixed-window 10/1m".parse().unwrap();
/// let mut state = any.fresh("key", 0); // an AnyState
/// assert!(any.check(&mut state, 1, 0).allowed);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyState {
    /// GCRA, token bucket or leaky bucket with the 8-byte state.
    Scaled(u64),
    /// GCRA, token bucket or leaky bucket with the 16-byte state (a `u128`
    /// as `[low, high]`).
    Wide([u64; 2]),
    /// Fixed window.
    Window(WindowState),
    /// Sliding log.
    Log(LogState),
    /// Sliding window.
    Sliding(SlidingWindowState),
}

macro_rules! from_algorithm {
    ($($variant:ident($payload:ty) => $wrap:expr),* $(,)?) => {$(
        impl From<$payload> for AnyAlgorithm {
            fn from(a: $payload) -> Self {
                Self::$variant($wrap(a))
            }
        }
    )*};
}
from_algorithm!(
    Gcra(Gcra) => AnyGcra::Narrow,
    Gcra(Gcra<u128>) => AnyGcra::Wide,
    Gcra(AnyGcra) => identity,
    TokenBucket(TokenBucket) => AnyTokenBucket::from,
    TokenBucket(TokenBucket<u128>) => AnyTokenBucket::from,
    TokenBucket(AnyTokenBucket) => identity,
    LeakyBucket(LeakyBucket) => AnyLeakyBucket::Narrow,
    LeakyBucket(LeakyBucket<u128>) => AnyLeakyBucket::Wide,
    LeakyBucket(AnyLeakyBucket) => identity,
    FixedWindow(FixedWindow) => identity,
    SlidingLog(SlidingLog) => identity,
    SlidingWindow(SlidingWindow) => identity,
);

/// Runs `$body` with `$a` bound to the concrete algorithm and `$s` to its
/// state. A state of another kind than the algorithm's is replaced by a
/// fresh one (it cannot arise through a store, which creates states with the
/// same algorithm).
macro_rules! dispatch {
    ($self:ident, $state:ident, $now:ident, |$a:ident, $s:ident| $body:expr) => {
        match $self {
            AnyAlgorithm::Gcra(AnyGcra::Narrow($a))
            | AnyAlgorithm::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Narrow($a),
            }) => {
                let $s = narrow($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::Gcra(AnyGcra::Wide($a))
            | AnyAlgorithm::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Wide($a),
            }) => {
                let $s = wide($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::LeakyBucket(AnyLeakyBucket::Narrow($a)) => {
                let $s = narrow($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::LeakyBucket(AnyLeakyBucket::Wide($a)) => {
                let $s = wide($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::FixedWindow($a) => {
                if !matches!($state, AnyState::Window(_)) {
                    *$state = AnyState::Window($a.fresh(&(), $now));
                }
                let AnyState::Window($s) = $state else {
                    unreachable!()
                };
                $body
            }
            AnyAlgorithm::SlidingLog($a) => {
                if !matches!($state, AnyState::Log(_)) {
                    *$state = AnyState::Log(LogState::default());
                }
                let AnyState::Log($s) = $state else {
                    unreachable!()
                };
                $body
            }
            AnyAlgorithm::SlidingWindow($a) => {
                if !matches!($state, AnyState::Sliding(_)) {
                    *$state = AnyState::Sliding($a.fresh(&(), $now));
                }
                let AnyState::Sliding($s) = $state else {
                    unreachable!()
                };
                $body
            }
        }
    };
}

fn narrow(state: &mut AnyState, fresh: impl FnOnce() -> u64) -> &mut u64 {
    if !matches!(state, AnyState::Scaled(_)) {
        *state = AnyState::Scaled(fresh());
    }
    match state {
        AnyState::Scaled(s) => s,
        _ => unreachable!(),
    }
}

fn wide(state: &mut AnyState, fresh: impl FnOnce() -> [u64; 2]) -> &mut [u64; 2] {
    if !matches!(state, AnyState::Wide(_)) {
        *state = AnyState::Wide(fresh());
    }
    match state {
        AnyState::Wide(s) => s,
        _ => unreachable!(),
    }
}

impl AnyAlgorithm {
    /// The concrete algorithm (for the token bucket, the GCRA it decides
    /// like: only its name differs).
    fn inner(&self) -> &dyn AlgorithmInfo {
        match self {
            Self::Gcra(AnyGcra::Narrow(a))
            | Self::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Narrow(a),
            }) => a,
            Self::Gcra(AnyGcra::Wide(a))
            | Self::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Wide(a),
            }) => a,
            Self::LeakyBucket(AnyLeakyBucket::Narrow(a)) => a,
            Self::LeakyBucket(AnyLeakyBucket::Wide(a)) => a,
            Self::FixedWindow(a) => a,
            Self::SlidingLog(a) => a,
            Self::SlidingWindow(a) => a,
        }
    }

    /// The rate `L per P` the algorithm admits in the long run: `(L, P)`
    /// (for the token bucket, its refill `(R, P)`; for a fixed window of a
    /// calendar unit, `P` is the unit's longest length).
    ///
    /// ```
    /// use ratelimit_core::AnyAlgorithm;
    /// use std::time::Duration;
    ///
    /// let a: AnyAlgorithm = "token-bucket 500 refill 100/1s".parse().unwrap();
    /// assert_eq!(a.rate(), (100, Duration::from_secs(1)));
    /// let b: AnyAlgorithm = "gcra 5/1m burst 2".parse().unwrap();
    /// assert_eq!(b.rate(), (5, Duration::from_secs(60)));
    /// ```
    pub fn rate(&self) -> (u64, Duration) {
        match self {
            Self::Gcra(a) => (a.rate_limit(), a.period()),
            Self::TokenBucket(a) => (a.refill(), a.period()),
            Self::LeakyBucket(a) => (a.rate_limit(), a.period()),
            Self::FixedWindow(a) => (a.rate_limit(), a.period()),
            Self::SlidingLog(a) => (a.rate_limit(), a.period()),
            Self::SlidingWindow(a) => (a.rate_limit(), a.period()),
        }
    }
}

/// The object-safe part of [`Algorithm`].
trait AlgorithmInfo {
    fn idle_horizon(&self) -> u64;
    fn limit(&self) -> u64;
    fn window(&self) -> Duration;
    fn name(&self) -> &'static str;
}

impl<A: Algorithm> AlgorithmInfo for A {
    fn idle_horizon(&self) -> u64 {
        Algorithm::idle_horizon(self)
    }
    fn limit(&self) -> u64 {
        Algorithm::limit(self)
    }
    fn window(&self) -> Duration {
        Algorithm::window(self)
    }
    fn name(&self) -> &'static str {
        Algorithm::name(self)
    }
}

impl Algorithm for AnyAlgorithm {
    type State = AnyState;

    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> AnyState {
        match self {
            Self::Gcra(AnyGcra::Narrow(a))
            | Self::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Narrow(a),
            }) => AnyState::Scaled(a.fresh(key, now)),
            Self::Gcra(AnyGcra::Wide(a))
            | Self::TokenBucket(AnyTokenBucket {
                gcra: AnyGcra::Wide(a),
            }) => AnyState::Wide(a.fresh(key, now)),
            Self::LeakyBucket(AnyLeakyBucket::Narrow(a)) => AnyState::Scaled(a.fresh(key, now)),
            Self::LeakyBucket(AnyLeakyBucket::Wide(a)) => AnyState::Wide(a.fresh(key, now)),
            Self::FixedWindow(a) => AnyState::Window(a.fresh(key, now)),
            Self::SlidingLog(a) => AnyState::Log(a.fresh(key, now)),
            Self::SlidingWindow(a) => AnyState::Sliding(a.fresh(key, now)),
        }
    }

    fn check(&self, state: &mut AnyState, cost: u64, now: u64) -> Decision {
        dispatch!(self, state, now, |a, s| a.check(s, cost, now))
    }

    /// GCRA and the token bucket tell a denial by reading their state.
    fn denies_read_only(&self) -> bool {
        matches!(self, Self::Gcra(_) | Self::TokenBucket(_))
    }

    fn check_denied(&self, state: &AnyState, cost: u64, now: u64) -> Option<Decision> {
        match (self, state) {
            (
                Self::Gcra(AnyGcra::Narrow(a))
                | Self::TokenBucket(AnyTokenBucket {
                    gcra: AnyGcra::Narrow(a),
                }),
                AnyState::Scaled(s),
            ) => a.check_denied(s, cost, now),
            (
                Self::Gcra(AnyGcra::Wide(a))
                | Self::TokenBucket(AnyTokenBucket {
                    gcra: AnyGcra::Wide(a),
                }),
                AnyState::Wide(s),
            ) => a.check_denied(s, cost, now),
            _ => None,
        }
    }

    fn charge(&self, state: &mut AnyState, cost: u64, now: u64) -> Decision {
        dispatch!(self, state, now, |a, s| a.charge(s, cost, now))
    }

    fn refund(&self, state: &mut AnyState, cost: u64, admitted_at: u64, now: u64) {
        dispatch!(self, state, now, |a, s| a.refund(s, cost, admitted_at, now))
    }

    fn is_full(&self, state: &AnyState, now: u64) -> bool {
        match (self, state) {
            (
                Self::Gcra(AnyGcra::Narrow(a))
                | Self::TokenBucket(AnyTokenBucket {
                    gcra: AnyGcra::Narrow(a),
                }),
                AnyState::Scaled(s),
            ) => a.is_full(s, now),
            (
                Self::Gcra(AnyGcra::Wide(a))
                | Self::TokenBucket(AnyTokenBucket {
                    gcra: AnyGcra::Wide(a),
                }),
                AnyState::Wide(s),
            ) => a.is_full(s, now),
            (Self::LeakyBucket(AnyLeakyBucket::Narrow(a)), AnyState::Scaled(s)) => {
                a.is_full(s, now)
            }
            (Self::LeakyBucket(AnyLeakyBucket::Wide(a)), AnyState::Wide(s)) => a.is_full(s, now),
            (Self::FixedWindow(a), AnyState::Window(s)) => a.is_full(s, now),
            (Self::SlidingLog(a), AnyState::Log(s)) => a.is_full(s, now),
            (Self::SlidingWindow(a), AnyState::Sliding(s)) => a.is_full(s, now),
            _ => true,
        }
    }

    fn idle_horizon(&self) -> u64 {
        self.inner().idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.inner().limit()
    }

    fn window(&self) -> Duration {
        self.inner().window()
    }

    fn name(&self) -> &'static str {
        match self {
            Self::TokenBucket(_) => "token-bucket",
            _ => self.inner().name(),
        }
    }
}
