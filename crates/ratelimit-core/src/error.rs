//! Typed errors: invalid settings at construction, and store failures.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A rate-limit setting that cannot be honoured exactly. Returned by every
/// constructor; nothing panics on bad input.
///
/// ```
/// use ratelimit_core::{ConfigError, Gcra};
/// use std::time::Duration;
///
/// let err = Gcra::new(0, Duration::from_secs(1)).unwrap_err();
/// assert!(matches!(err, ConfigError::ZeroLimit(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A limit, capacity or refill amount of zero.
    ZeroLimit(&'static str),
    /// A period of zero.
    ZeroPeriod,
    /// A burst of zero.
    ZeroBurst,
    /// The period does not fit in `u64` nanoseconds (584 years).
    PeriodTooLong(Duration),
    /// The settings would overflow the exact integer arithmetic.
    Overflow(&'static str),
    /// A sliding log would keep more entries per key than allowed.
    LogTooLong {
        /// The requested limit.
        limit: u64,
        /// The configured bound on entries per key.
        max: u64,
    },
    /// A duration string that could not be parsed.
    BadDuration(String),
    /// A ban setting out of range (see [`BanPolicy`](crate::BanPolicy)),
    /// naming it and the value.
    BadBan(String),
    /// A store setting out of range (a cap of 0 keys, a shard count past
    /// the bounds), naming it and the value.
    BadSetting(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroLimit(what) => write!(f, "{what} must be at least 1"),
            Self::ZeroPeriod => f.write_str("period must be longer than zero"),
            Self::ZeroBurst => f.write_str("burst must be at least 1"),
            Self::PeriodTooLong(p) => write!(f, "period {p:?} is too long (at most 584 years)"),
            Self::Overflow(what) => write!(f, "{what} is too large to compute exactly"),
            Self::LogTooLong { limit, max } => write!(
                f,
                "sliding log limit {limit} exceeds the bound of {max} entries per key \
                 (memory is O(limit) per key; use sliding-window or raise the bound)"
            ),
            Self::BadBan(s) | Self::BadSetting(s) => f.write_str(s),
            Self::BadDuration(s) => write!(
                f,
                "bad duration {s:?}: expected a positive integer and a unit (ms, s, m, h, d), like 500ms or 1h"
            ),
        }
    }
}

impl Error for ConfigError {}

/// A store could not decide.
///
/// Remote stores sort their failures into two classes, each carrying a
/// [`RemoteError`] (a short kind name and the source error):
/// [`Unavailable`](Self::Unavailable) (the store could not be reached or
/// could not answer now) and [`Refused`](Self::Refused) (the store
/// answered, with an error). The HTTP layer's failure policy treats every
/// variant alike; the class is for callers and logs.
///
/// ```
/// use ratelimit_core::StoreError;
/// use std::error::Error;
///
/// let e = StoreError::unavailable("timeout", "no answer within 50ms");
/// assert!(e.is_unavailable());
/// assert_eq!(e.kind(), "timeout");
/// assert_eq!(e.to_string(), "rate-limit store unavailable (timeout): no answer within 50ms");
/// assert_eq!(e.source().unwrap().to_string(), "no answer within 50ms");
///
/// let e = StoreError::refused("oom", "OOM command not allowed");
/// assert!(!e.is_unavailable());
/// assert_eq!(e.to_string(), "rate-limit store refused the call (oom): OOM command not allowed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The in-memory store holds its configured maximum number of keys, and
    /// none of them could be dropped. See
    /// [`MemoryStoreBuilder::max_keys`](crate::store::MemoryStoreBuilder::max_keys).
    CapacityExceeded {
        /// The configured cap.
        max_keys: usize,
    },
    /// The store could not be reached or could not answer now: connection
    /// refused or broken, no answer in time, a circuit breaker open, or a
    /// server that says to come back later (busy, loading, failing over).
    /// A later call may succeed without anyone acting.
    Unavailable(RemoteError),
    /// The store answered, with an error: it refused the call (out of
    /// memory, permissions, authentication, a foreign value at the key, a
    /// failed script) or its reply made no sense. Calls keep failing until
    /// the store's settings or data are fixed.
    Refused(RemoteError),
}

impl StoreError {
    /// An [`Unavailable`](Self::Unavailable) error of `kind` (a short
    /// name, such as `timeout` or `io`) caused by `source`.
    pub fn unavailable(
        kind: &'static str,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Unavailable(RemoteError::new(kind, source))
    }

    /// A [`Refused`](Self::Refused) error of `kind` (a short name, such
    /// as `oom` or `noperm`) caused by `source`.
    pub fn refused(
        kind: &'static str,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Refused(RemoteError::new(kind, source))
    }

    /// The kind's short name: `capacity_exceeded`, or the remote error's
    /// [`kind`](RemoteError::kind).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CapacityExceeded { .. } => "capacity_exceeded",
            Self::Unavailable(e) | Self::Refused(e) => e.kind,
        }
    }

    /// Whether the store could not be reached or could not answer now
    /// ([`Unavailable`](Self::Unavailable)).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityExceeded { max_keys } => {
                write!(f, "rate-limit store is full ({max_keys} keys)")
            }
            Self::Unavailable(e) => write!(
                f,
                "rate-limit store unavailable ({}): {}",
                e.kind,
                e.message()
            ),
            Self::Refused(e) => write!(
                f,
                "rate-limit store refused the call ({}): {}",
                e.kind,
                e.message()
            ),
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::CapacityExceeded { .. } => None,
            Self::Unavailable(e) | Self::Refused(e) => Some(e.source_error()),
        }
    }
}

/// What a remote store reported: a short kind name, the store's name if
/// it gave one, and the source error, kept as it came (a
/// `redis::RedisError`, an I/O error, ...) and shared, so the error stays
/// cheap to clone.
///
/// ```
/// use ratelimit_core::{store::RemoteError, StoreError};
///
/// let remote = RemoteError::new("timeout", "no answer in time").in_store("redis");
/// assert_eq!((remote.kind(), remote.store()), ("timeout", Some("redis")));
/// let err = StoreError::Unavailable(remote);
/// assert!(err.is_unavailable());
/// ```
///
/// Two remote errors are equal when their kinds, stores and messages are.
#[derive(Clone)]
pub struct RemoteError {
    kind: &'static str,
    store: Option<&'static str>,
    source: Arc<dyn Error + Send + Sync + 'static>,
}

impl RemoteError {
    /// A remote error of `kind` caused by `source` (an error, or a message).
    pub fn new(
        kind: &'static str,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::shared(kind, Arc::from(source.into()))
    }

    /// A remote error of `kind` caused by a `source` already shared.
    pub fn shared(kind: &'static str, source: Arc<dyn Error + Send + Sync + 'static>) -> Self {
        Self {
            kind,
            store: None,
            source,
        }
    }

    /// Names the store (`redis`, ...), shown before the message.
    pub fn in_store(mut self, store: &'static str) -> Self {
        self.store = Some(store);
        self
    }

    /// The store's name, if it gave one.
    pub fn store(&self) -> Option<&'static str> {
        self.store
    }

    /// The kind's short name (`timeout`, `io`, `oom`, ...): the Redis
    /// store's names are listed in its crate docs.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn message(&self) -> Message<'_> {
        Message(self)
    }

    /// The source error.
    pub fn source_error(&self) -> &(dyn Error + 'static) {
        &*self.source
    }
}

impl fmt::Debug for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteError")
            .field("kind", &self.kind)
            .field("store", &self.store)
            .field("source", &self.source)
            .finish()
    }
}

/// `kind: store: message`, or `kind: message`.
impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message())
    }
}

/// The message after the kind: `store: source`, or the source alone.
struct Message<'a>(&'a RemoteError);

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.store {
            Some(store) => write!(f, "{store}: {}", self.0.source),
            None => write!(f, "{}", self.0.source),
        }
    }
}

impl PartialEq for RemoteError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.store == other.store
            && self.source.to_string() == other.source.to_string()
    }
}

impl Eq for RemoteError {}
