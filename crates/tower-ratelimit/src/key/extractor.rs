//! The [`KeyExtractor`] trait, its error, and closures as extractors.

use http::request::Parts;
use http::StatusCode;
use std::fmt;

/// Finds the key a request is limited by: a client IP, a token, a user...
///
/// Extractors see the request head ([`Parts`]: method, URI, headers and
/// extensions), never the body, so one extractor serves every body type.
/// Closures `Fn(&Parts) -> Result<K, KeyError>` are extractors too (a
/// closure given to a layer names its argument's type: `|req: &Parts|`).
///
/// A key lives as long as its limit's state, so it must own small data:
/// never return a clone of a `HeaderValue`, `Bytes` or `Uri` of the request
/// (they share the buffer holding the whole request head, kilobytes per
/// key), and bound its length. [`HeaderKey::new`](super::HeaderKey::new)
/// does both: it copies up to 64 bytes and hashes longer values.
///
/// ```
/// use http::request::Parts;
/// use tower_ratelimit::key::{HeaderKey, KeyError, KeyExtractor};
///
/// let tenant = |req: &Parts| {
///     req.headers
///         .get("x-tenant")
///         .map(|v| HeaderKey::new(v.as_bytes()))
///         .ok_or(KeyError::missing("X-Tenant header"))
/// };
/// let req = http::Request::builder().header("x-tenant", "acme").body(()).unwrap();
/// assert_eq!(tenant.extract(&req.into_parts().0).unwrap().stored(), "acme");
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key. Keys for a remote store also need `Display`; every built-in
    /// key implements it.
    type Key: Send + Sync + 'static;

    /// The key of `req`, or why there is none.
    fn extract(&self, req: &Parts) -> Result<Self::Key, KeyError>;
}

impl<F, K> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Key = K;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<K, KeyError> {
        self(req)
    }
}

/// Whether the key was absent or present but unusable.
///
/// ```
/// use tower_ratelimit::key::{KeyError, KeyErrorKind};
///
/// assert_eq!(KeyError::missing("x-api-key").kind(), KeyErrorKind::Missing);
/// assert_eq!(KeyError::malformed("x-api-key").kind(), KeyErrorKind::Malformed);
/// assert_eq!(KeyError::denied("client ip").kind(), KeyErrorKind::Denied);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyErrorKind {
    /// Nothing to key on (no header, no token, no connection info).
    Missing,
    /// Something was there but could not be read (bad syntax, non-UTF-8
    /// bytes, repeated header...).
    Malformed,
    /// The client is on a deny list: answered 403 whatever the
    /// [`KeyErrorPolicy`](crate::strategy::KeyErrorPolicy).
    Denied,
}

/// Why no key could be extracted. It carries the status of the response
/// sent when the layer rejects such requests (see
/// [`KeyErrorPolicy`](crate::strategy::KeyErrorPolicy)): a 4xx, never a 5xx.
///
/// ```
/// use http::StatusCode;
/// use tower_ratelimit::key::KeyError;
///
/// let err = KeyError::missing("x-api-key");
/// assert_eq!((err.what(), err.status()), ("x-api-key", StatusCode::BAD_REQUEST));
/// let err = err.with_status(StatusCode::UNAUTHORIZED).with_challenge("ApiKey");
/// assert_eq!(err.challenge(), Some("ApiKey"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyError {
    kind: KeyErrorKind,
    what: &'static str,
    status: StatusCode,
    challenge: Option<&'static str>,
}

impl KeyError {
    /// `what` is absent; answered with 400 unless [`with_status`](Self::with_status) says otherwise.
    pub const fn missing(what: &'static str) -> Self {
        Self {
            kind: KeyErrorKind::Missing,
            what,
            status: StatusCode::BAD_REQUEST,
            challenge: None,
        }
    }

    /// `what` is present but unusable; answered with 400 unless
    /// [`with_status`](Self::with_status) says otherwise.
    pub const fn malformed(what: &'static str) -> Self {
        Self {
            kind: KeyErrorKind::Malformed,
            what,
            status: StatusCode::BAD_REQUEST,
            challenge: None,
        }
    }

    /// The client (`what`: its IP, its key) is on a deny list: answered
    /// with 403, whatever the key-error policy.
    pub const fn denied(what: &'static str) -> Self {
        Self {
            kind: KeyErrorKind::Denied,
            what,
            status: StatusCode::FORBIDDEN,
            challenge: None,
        }
    }

    /// Whether the client is on a deny list.
    pub const fn is_denied(&self) -> bool {
        matches!(self.kind, KeyErrorKind::Denied)
    }

    /// The response status. A status outside 400..=499 is replaced by 400,
    /// so a key error can never become a 5xx.
    pub const fn with_status(mut self, status: StatusCode) -> Self {
        let code = status.as_u16();
        self.status = if code >= 400 && code <= 499 {
            status
        } else {
            StatusCode::BAD_REQUEST
        };
        self
    }

    /// A `WWW-Authenticate` challenge to send with the rejection: with a 401
    /// (`Bearer`), or with a 400 for a malformed token
    /// (`Bearer error="invalid_request"`, RFC 6750 section 3.1).
    pub const fn with_challenge(mut self, challenge: &'static str) -> Self {
        self.challenge = Some(challenge);
        self
    }

    /// Missing or malformed.
    pub const fn kind(&self) -> KeyErrorKind {
        self.kind
    }

    /// Whether the key was simply absent.
    pub const fn is_missing(&self) -> bool {
        matches!(self.kind, KeyErrorKind::Missing)
    }

    /// What was looked for (`"bearer token"`, `"X-Forwarded-For header"`).
    pub const fn what(&self) -> &'static str {
        self.what
    }

    /// The status of the rejection.
    pub const fn status(&self) -> StatusCode {
        self.status
    }

    /// The `WWW-Authenticate` challenge, if any.
    pub const fn challenge(&self) -> Option<&'static str> {
        self.challenge
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            KeyErrorKind::Missing => write!(f, "missing {}", self.what),
            KeyErrorKind::Malformed => write!(f, "malformed {}", self.what),
            KeyErrorKind::Denied => write!(f, "{} on the deny list", self.what),
        }
    }
}

impl std::error::Error for KeyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_a_server_error() {
        let e = KeyError::missing("x").with_status(StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let e = KeyError::missing("x").with_status(StatusCode::UNAUTHORIZED);
        assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(e.to_string(), "missing x");
        assert_eq!(KeyError::malformed("y").to_string(), "malformed y");
    }
}
