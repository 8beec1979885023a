//! One type for all six algorithms, chosen at run time.

use super::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, LogState, SlidingLog, SlidingWindow,
    SlidingWindowState, TokenBucket, WindowState,
};
use crate::Decision;
use std::hash::Hash;
use std::time::Duration;

/// Any of the six algorithms, for configuration chosen at run time (the sim,
/// config files). Prefer the concrete type when it is known: its state is
/// smaller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyAlgorithm {
    /// [`Gcra`].
    Gcra(Gcra),
    /// [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// [`LeakyBucket`].
    LeakyBucket(LeakyBucket),
    /// [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
}

/// The state of an [`AnyAlgorithm`] key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyState {
    /// GCRA, token bucket or leaky bucket.
    Scaled(u64),
    /// Fixed window.
    Window(WindowState),
    /// Sliding log.
    Log(LogState),
    /// Sliding window.
    Sliding(SlidingWindowState),
}

macro_rules! from_algorithm {
    ($($variant:ident),*) => {$(
        impl From<$variant> for AnyAlgorithm {
            fn from(a: $variant) -> Self {
                Self::$variant(a)
            }
        }
    )*};
}
from_algorithm!(
    Gcra,
    TokenBucket,
    LeakyBucket,
    FixedWindow,
    SlidingLog,
    SlidingWindow
);

/// Runs `$body` with `$a` bound to the concrete algorithm and `$s` to its
/// state. A state of another kind than the algorithm's is replaced by a
/// fresh one (it cannot arise through a store, which creates states with the
/// same algorithm).
macro_rules! dispatch {
    ($self:ident, $state:ident, $now:ident, |$a:ident, $s:ident| $body:expr) => {
        match $self {
            AnyAlgorithm::Gcra($a) => {
                let $s = scaled($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::TokenBucket($a) => {
                let $s = scaled($state, || $a.fresh(&(), $now));
                $body
            }
            AnyAlgorithm::LeakyBucket($a) => {
                let $s = scaled($state, || $a.fresh(&(), $now));
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

fn scaled(state: &mut AnyState, fresh: impl FnOnce() -> u64) -> &mut u64 {
    if !matches!(state, AnyState::Scaled(_)) {
        *state = AnyState::Scaled(fresh());
    }
    match state {
        AnyState::Scaled(s) => s,
        _ => unreachable!(),
    }
}

impl AnyAlgorithm {
    fn inner(&self) -> &dyn AlgorithmInfo {
        match self {
            Self::Gcra(a) => a,
            Self::TokenBucket(a) => a,
            Self::LeakyBucket(a) => a,
            Self::FixedWindow(a) => a,
            Self::SlidingLog(a) => a,
            Self::SlidingWindow(a) => a,
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

    fn fresh<K: Hash + ?Sized>(&self, key: &K, now: u64) -> AnyState {
        match self {
            Self::Gcra(a) => AnyState::Scaled(a.fresh(key, now)),
            Self::TokenBucket(a) => AnyState::Scaled(a.fresh(key, now)),
            Self::LeakyBucket(a) => AnyState::Scaled(a.fresh(key, now)),
            Self::FixedWindow(a) => AnyState::Window(a.fresh(key, now)),
            Self::SlidingLog(a) => AnyState::Log(a.fresh(key, now)),
            Self::SlidingWindow(a) => AnyState::Sliding(a.fresh(key, now)),
        }
    }

    fn check(&self, state: &mut AnyState, now: u64, cost: u64) -> Decision {
        dispatch!(self, state, now, |a, s| a.check(s, now, cost))
    }

    fn refund(&self, state: &mut AnyState, now: u64, admitted_at: u64, cost: u64) {
        dispatch!(self, state, now, |a, s| a.refund(s, now, admitted_at, cost))
    }

    fn is_full(&self, state: &AnyState, now: u64) -> bool {
        match (self, state) {
            (Self::Gcra(a), AnyState::Scaled(s)) => a.is_full(s, now),
            (Self::TokenBucket(a), AnyState::Scaled(s)) => a.is_full(s, now),
            (Self::LeakyBucket(a), AnyState::Scaled(s)) => a.is_full(s, now),
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
        self.inner().name()
    }
}
