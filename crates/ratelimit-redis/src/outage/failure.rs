//! Why a call got no decision from Redis, sorted into a fixed set of kinds:
//! the `kind` label of `ratelimit_redis_errors_total`, the schedule of the
//! rate-limited warnings, and the class of the [`StoreError`] returned
//! (unavailable or refused).

use ratelimit_core::{RemoteError, StoreError};
use redis::{ErrorKind, RedisError, ServerErrorKind};
use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// The kind of a failure. Every one is handled alike (fallback or error,
/// counted by the breaker); the kind names it in logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No answer within the store's timeout.
    Timeout,
    /// The connection failed or broke (refused, reset, closed).
    Io,
    /// The breaker is open: Redis was not called.
    BreakerOpen,
    /// `OOM`: `maxmemory` reached with a `noeviction` policy.
    Oom,
    /// `NOPERM`: an ACL forbids a command the store needs.
    NoPerm,
    /// `NOAUTH` (or an unauthenticated command refused as a protocol
    /// error): the server wants a password the store did not give.
    NoAuth,
    /// `WRONGPASS` or a refused `AUTH` when connecting.
    WrongPass,
    /// `READONLY`: the server is a replica.
    ReadOnly,
    /// `BUSY`: a script or function is running too long.
    Busy,
    /// `LOADING`: the server is loading its dataset.
    Loading,
    /// `MASTERDOWN`: a replica lost its master and serves no stale data.
    MasterDown,
    /// `CLUSTERDOWN`.
    ClusterDown,
    /// `TRYAGAIN` (a cluster slot being migrated).
    TryAgain,
    /// `MISCONF`: writes refused after a failed snapshot.
    Misconf,
    /// `WRONGTYPE`: something other than the store wrote at its key.
    WrongType,
    /// `NOSCRIPT` even after reloading the script.
    NoScript,
    /// `ERR`: the script failed (unreadable state at the key, ...) or the
    /// server refused the command.
    Err,
    /// A reply of the wrong type or shape for the script's.
    Reply,
    /// Anything else (an unknown error code, a client-side error).
    Other,
}

impl Kind {
    /// Every kind, in index order.
    pub(crate) const ALL: [Kind; 19] = [
        Kind::Timeout,
        Kind::Io,
        Kind::BreakerOpen,
        Kind::Oom,
        Kind::NoPerm,
        Kind::NoAuth,
        Kind::WrongPass,
        Kind::ReadOnly,
        Kind::Busy,
        Kind::Loading,
        Kind::MasterDown,
        Kind::ClusterDown,
        Kind::TryAgain,
        Kind::Misconf,
        Kind::WrongType,
        Kind::NoScript,
        Kind::Err,
        Kind::Reply,
        Kind::Other,
    ];

    /// The number of kinds.
    pub(crate) const COUNT: usize = Self::ALL.len();

    /// The kind's position in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The kind's name, as logged and in the `kind` metrics label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Timeout => "timeout",
            Kind::Io => "io",
            Kind::BreakerOpen => "breaker_open",
            Kind::Oom => "oom",
            Kind::NoPerm => "noperm",
            Kind::NoAuth => "noauth",
            Kind::WrongPass => "wrongpass",
            Kind::ReadOnly => "readonly",
            Kind::Busy => "busy",
            Kind::Loading => "loading",
            Kind::MasterDown => "masterdown",
            Kind::ClusterDown => "clusterdown",
            Kind::TryAgain => "tryagain",
            Kind::Misconf => "misconf",
            Kind::WrongType => "wrongtype",
            Kind::NoScript => "noscript",
            Kind::Err => "err",
            Kind::Reply => "reply",
            Kind::Other => "other",
        }
    }

    /// Whether Redis could not be reached or could not answer now
    /// ([`StoreError::Unavailable`]), as against an answer that refused the
    /// call ([`StoreError::Refused`]). Unavailable are the kinds the
    /// `redis` crate's `RetryMethod` would retry (wait, reconnect, or
    /// follow a failover: `LOADING`, `MASTERDOWN`, `CLUSTERDOWN`,
    /// `TRYAGAIN`, `READONLY`), `BUSY` (a script that will end), timeouts,
    /// broken connections and the open breaker; the rest are answers that
    /// stay the same until someone changes the server, its ACLs or the key.
    pub(crate) fn is_unavailable(self) -> bool {
        match self {
            Kind::Timeout
            | Kind::Io
            | Kind::BreakerOpen
            | Kind::ReadOnly
            | Kind::Busy
            | Kind::Loading
            | Kind::MasterDown
            | Kind::ClusterDown
            | Kind::TryAgain => true,
            Kind::Oom
            | Kind::NoPerm
            | Kind::NoAuth
            | Kind::WrongPass
            | Kind::Misconf
            | Kind::WrongType
            | Kind::NoScript
            | Kind::Err
            | Kind::Reply
            | Kind::Other => false,
        }
    }

    /// The kind of an error of the `redis` crate.
    pub(crate) fn of(e: &RedisError) -> Kind {
        match e.kind() {
            ErrorKind::Server(k) => match k {
                ServerErrorKind::BusyLoading => Kind::Loading,
                ServerErrorKind::MasterDown => Kind::MasterDown,
                ServerErrorKind::TryAgain => Kind::TryAgain,
                ServerErrorKind::ClusterDown => Kind::ClusterDown,
                ServerErrorKind::ReadOnly => Kind::ReadOnly,
                ServerErrorKind::NoPerm => Kind::NoPerm,
                ServerErrorKind::NoScript => Kind::NoScript,
                // Commands longer than a few arguments, before AUTH.
                ServerErrorKind::ResponseError
                    if e.detail()
                        .is_some_and(|d| d.starts_with("Protocol error: unauthenticated")) =>
                {
                    Kind::NoAuth
                }
                ServerErrorKind::ResponseError => Kind::Err,
                _ => Kind::Other,
            },
            ErrorKind::Extension => match e.code() {
                Some("OOM") => Kind::Oom,
                Some("NOAUTH") => Kind::NoAuth,
                Some("WRONGPASS") => Kind::WrongPass,
                Some("BUSY") => Kind::Busy,
                Some("MISCONF") => Kind::Misconf,
                Some("WRONGTYPE") => Kind::WrongType,
                _ => Kind::Other,
            },
            ErrorKind::AuthenticationFailed => Kind::WrongPass,
            ErrorKind::Io if e.is_timeout() => Kind::Timeout,
            ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => Kind::Io,
            ErrorKind::UnexpectedReturnType | ErrorKind::Parse => Kind::Reply,
            _ => Kind::Other,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call that got no decision from Redis: its kind and the error, kept
/// as it came (a [`RedisError`], or a message of the store's own).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) kind: Kind,
    pub(crate) source: Arc<dyn Error + Send + Sync + 'static>,
}

impl Failure {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        let message: Box<dyn Error + Send + Sync> = message.into().into();
        Self {
            kind,
            source: Arc::from(message),
        }
    }

    /// A failure from an error of the `redis` crate, kept as the source.
    pub(crate) fn redis(e: &RedisError) -> Self {
        Self {
            kind: Kind::of(e),
            source: Arc::new(e.clone()),
        }
    }

    /// The store's error: unavailable or refused by the kind, named by it,
    /// with the source error.
    pub(crate) fn to_store_error(&self) -> StoreError {
        let e = RemoteError::shared(self.kind.as_str(), Arc::clone(&self.source)).in_store("redis");
        if self.kind.is_unavailable() {
            StoreError::Unavailable(e)
        } else {
            StoreError::Refused(e)
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = if self.kind.is_unavailable() {
            "unavailable"
        } else {
            "refused the call"
        };
        write!(f, "redis {class} ({}): {}", self.kind, self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_all_and_names_are_unique() {
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        let mut names: Vec<_> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Kind::COUNT);
    }

    #[test]
    fn server_codes_are_named() {
        let cases = [
            ("OOM", Kind::Oom),
            ("NOPERM", Kind::NoPerm),
            ("NOAUTH", Kind::NoAuth),
            ("WRONGPASS", Kind::WrongPass),
            ("READONLY", Kind::ReadOnly),
            ("BUSY", Kind::Busy),
            ("LOADING", Kind::Loading),
            ("MASTERDOWN", Kind::MasterDown),
            ("CLUSTERDOWN", Kind::ClusterDown),
            ("TRYAGAIN", Kind::TryAgain),
            ("MISCONF", Kind::Misconf),
            ("WRONGTYPE", Kind::WrongType),
            ("NOSCRIPT", Kind::NoScript),
            ("ERR", Kind::Err),
            (
                "ERR Protocol error: unauthenticated multibulk length",
                Kind::NoAuth,
            ),
            ("SOMETHINGNEW", Kind::Other),
        ];
        for (code, kind) in cases {
            let line = format!("-{code} some detail\r\n");
            let value = redis::parse_redis_value(line.as_bytes()).unwrap();
            let e = value.extract_error().unwrap_err();
            assert_eq!(Kind::of(&e), kind, "{code}: {e:?}");
        }
    }

    #[test]
    fn store_errors_keep_the_class_the_kind_and_the_source() {
        let value = redis::parse_redis_value(b"-OOM command not allowed\r\n").unwrap();
        let e = value.extract_error().unwrap_err();
        let store = Failure::redis(&e).to_store_error();
        assert!(matches!(store, StoreError::Refused(_)), "{store:?}");
        assert_eq!(store.kind(), "oom");
        let source = std::error::Error::source(&store).unwrap();
        let redis = source.downcast_ref::<RedisError>().unwrap();
        assert_eq!(redis.code(), Some("OOM"));
        assert!(
            store.to_string().contains("refused the call (oom)"),
            "{store}"
        );

        let value = redis::parse_redis_value(b"-LOADING loading the dataset\r\n").unwrap();
        let e = value.extract_error().unwrap_err();
        let store = Failure::redis(&e).to_store_error();
        assert!(store.is_unavailable(), "{store:?}");
        assert_eq!(store.kind(), "loading");

        let store = Failure::new(Kind::Timeout, "no answer within 50ms").to_store_error();
        assert!(store.is_unavailable());
        assert_eq!(
            store.to_string(),
            "rate-limit store unavailable (timeout): redis: no answer within 50ms"
        );
    }

    #[test]
    fn every_kind_has_a_class() {
        let unavailable: Vec<_> = Kind::ALL
            .iter()
            .filter(|k| k.is_unavailable())
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            unavailable,
            [
                "timeout",
                "io",
                "breaker_open",
                "readonly",
                "busy",
                "loading",
                "masterdown",
                "clusterdown",
                "tryagain"
            ]
        );
    }
}
