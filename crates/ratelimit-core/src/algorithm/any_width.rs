//! GCRA, the token bucket and the leaky bucket in whichever state width a
//! setting needs: the payloads of [`AnyAlgorithm`](crate::AnyAlgorithm)'s
//! scaled-time variants.

use crate::ConfigError;
use crate::{Gcra, LeakyBucket, TokenBucket};
use std::time::Duration;

/// The narrow result if it holds the setting, else the wide one (which
/// reports its own error, if any). Only an overflow of the narrow state
/// falls back: any other error is the setting's own.
fn narrow_or_wide<N, W, T: From<N> + From<W>>(
    narrow: Result<N, ConfigError>,
    wide: impl FnOnce() -> Result<W, ConfigError>,
) -> Result<T, ConfigError> {
    match narrow {
        Ok(n) => Ok(T::from(n)),
        Err(ConfigError::Overflow(_)) => wide().map(T::from),
        Err(e) => Err(e),
    }
}

/// A [`Gcra`] in the state width its setting needs: 8 bytes per key when
/// that holds it, 16 otherwise (see [`Gcra`]'s "State width"). It decides
/// the same either way.
///
/// ```
/// use ratelimit_core::algorithm::AnyGcra;
/// use std::time::Duration;
///
/// let day = Duration::from_secs(86_400);
/// assert!(!AnyGcra::new(30_000, day).unwrap().is_wide());
/// assert!(AnyGcra::new(30_001, day).unwrap().is_wide());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyGcra {
    /// With an 8-byte state.
    Narrow(Gcra),
    /// With a 16-byte state.
    Wide(Gcra<u128>),
}

impl AnyGcra {
    /// `limit` per `period`, burst `limit`, in the narrowest state that
    /// holds it.
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::with_burst(limit, period, limit)
    }

    /// `limit` per `period` with a burst of `burst`, in the narrowest state
    /// that holds it.
    pub fn with_burst(limit: u64, period: Duration, burst: u64) -> Result<Self, ConfigError> {
        narrow_or_wide(Gcra::with_burst(limit, period, burst), || {
            Gcra::with_burst_wide(limit, period, burst)
        })
    }

    /// Whether the state is the 16-byte one.
    pub fn is_wide(&self) -> bool {
        matches!(self, Self::Wide(_))
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        match self {
            Self::Narrow(a) => a.rate_limit(),
            Self::Wide(a) => a.rate_limit(),
        }
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        match self {
            Self::Narrow(a) => a.period(),
            Self::Wide(a) => a.period(),
        }
    }

    /// The burst `B`.
    pub fn burst(&self) -> u64 {
        match self {
            Self::Narrow(a) => a.burst(),
            Self::Wide(a) => a.burst(),
        }
    }
}

impl From<Gcra> for AnyGcra {
    fn from(a: Gcra) -> Self {
        Self::Narrow(a)
    }
}

impl From<Gcra<u128>> for AnyGcra {
    fn from(a: Gcra<u128>) -> Self {
        Self::Wide(a)
    }
}

/// A [`TokenBucket`] in the state width its setting needs: 8 bytes per key
/// when that holds it, 16 otherwise. It decides the same either way.
///
/// A token bucket is a GCRA under another name, so this is the
/// [`AnyGcra`] it decides like ([`as_gcra`](Self::as_gcra)).
///
/// ```
/// use ratelimit_core::algorithm::AnyTokenBucket;
/// use std::time::Duration;
///
/// let day = Duration::from_secs(86_400);
/// let bucket = AnyTokenBucket::new(1_000_000, 7, day).unwrap();
/// assert!(bucket.is_wide());
/// assert_eq!((bucket.capacity(), bucket.refill()), (1_000_000, 7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnyTokenBucket {
    pub(super) gcra: AnyGcra,
}

impl AnyTokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill` per `period`, in
    /// the narrowest state that holds it.
    pub fn new(capacity: u64, refill: u64, period: Duration) -> Result<Self, ConfigError> {
        narrow_or_wide(TokenBucket::new(capacity, refill, period), || {
            TokenBucket::new_wide(capacity, refill, period)
        })
    }

    /// Whether the state is the 16-byte one.
    pub fn is_wide(&self) -> bool {
        self.gcra.is_wide()
    }

    /// The bucket, if its state is the 8-byte one.
    pub fn narrow(&self) -> Option<TokenBucket> {
        match self.gcra {
            AnyGcra::Narrow(g) => Some(TokenBucket::from_gcra(g)),
            AnyGcra::Wide(_) => None,
        }
    }

    /// The bucket, if its state is the 16-byte one.
    pub fn wide(&self) -> Option<TokenBucket<u128>> {
        match self.gcra {
            AnyGcra::Wide(g) => Some(TokenBucket::from_gcra(g)),
            AnyGcra::Narrow(_) => None,
        }
    }

    /// The capacity `C`.
    pub fn capacity(&self) -> u64 {
        self.gcra.burst()
    }

    /// The refill amount `R` per period.
    pub fn refill(&self) -> u64 {
        self.gcra.rate_limit()
    }

    /// The refill period `P`.
    pub fn period(&self) -> Duration {
        self.gcra.period()
    }

    /// The equivalent GCRA.
    pub fn as_gcra(&self) -> &AnyGcra {
        &self.gcra
    }
}

impl From<TokenBucket> for AnyTokenBucket {
    fn from(a: TokenBucket) -> Self {
        Self {
            gcra: AnyGcra::Narrow(*a.as_gcra()),
        }
    }
}

impl From<TokenBucket<u128>> for AnyTokenBucket {
    fn from(a: TokenBucket<u128>) -> Self {
        Self {
            gcra: AnyGcra::Wide(*a.as_gcra()),
        }
    }
}

/// A [`LeakyBucket`] in the state width its setting needs: 8 bytes per key
/// when that holds it, 16 otherwise. It decides the same either way.
///
/// ```
/// use ratelimit_core::algorithm::AnyLeakyBucket;
/// use std::time::Duration;
///
/// let day = Duration::from_secs(86_400);
/// assert!(!AnyLeakyBucket::new(10, Duration::from_secs(1), 5).unwrap().is_wide());
/// assert!(AnyLeakyBucket::new(7, day, 1_000_000).unwrap().is_wide());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyLeakyBucket {
    /// With an 8-byte state.
    Narrow(LeakyBucket),
    /// With a 16-byte state.
    Wide(LeakyBucket<u128>),
}

impl AnyLeakyBucket {
    /// `limit` departures per `period`, with up to `queue` waiting, in the
    /// narrowest state that holds it.
    pub fn new(limit: u64, period: Duration, queue: u64) -> Result<Self, ConfigError> {
        narrow_or_wide(LeakyBucket::new(limit, period, queue), || {
            LeakyBucket::new_wide(limit, period, queue)
        })
    }

    /// Whether the state is the 16-byte one.
    pub fn is_wide(&self) -> bool {
        matches!(self, Self::Wide(_))
    }

    /// The departures per period `L`.
    pub fn rate_limit(&self) -> u64 {
        match self {
            Self::Narrow(a) => a.rate_limit(),
            Self::Wide(a) => a.rate_limit(),
        }
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        match self {
            Self::Narrow(a) => a.period(),
            Self::Wide(a) => a.period(),
        }
    }

    /// The queue length `Q`.
    pub fn queue(&self) -> u64 {
        match self {
            Self::Narrow(a) => a.queue(),
            Self::Wide(a) => a.queue(),
        }
    }
}

impl From<LeakyBucket> for AnyLeakyBucket {
    fn from(a: LeakyBucket) -> Self {
        Self::Narrow(a)
    }
}

impl From<LeakyBucket<u128>> for AnyLeakyBucket {
    fn from(a: LeakyBucket<u128>) -> Self {
        Self::Wide(a)
    }
}
