//! A request header's value as the key, and the [`HeaderKey`] type shared by header-based extractors.

use super::digest::hashed;
use super::{KeyError, KeyExtractor};
use crate::BuildError;
use http::header::HeaderName;
use http::request::Parts;
use std::fmt;

/// A key read from a header (a value, an API key, a bearer token), owning
/// its bytes: it never keeps the request's buffers alive.
///
/// ```
/// use tower_ratelimit::key::HeaderKey;
///
/// let short = HeaderKey::new(b"demo-key-1");
/// assert_eq!(short.sent(), Some("demo-key-1"));
/// let jwt = "e".repeat(100);
/// let long = HeaderKey::new(jwt.as_bytes());
/// assert_eq!(long.sent(), None); // only its digest is kept
/// assert_eq!(long.stored().len(), 33); // `#` and 32 hex digits
/// // Look a long key up by the key of the text you hold:
/// assert_eq!(long, HeaderKey::new(jwt.as_bytes()));
/// ```
///
/// - Up to 64 bytes of visible ASCII (spaces allowed inside) not starting
///   with `#`: the key's own text, in one exact-size allocation
///   ([`sent`](Self::sent) gives it back).
/// - Anything else (longer, or starting with `#`): only `#` followed by
///   the 32 hex digits of a 128-bit SipHash-2-4 digest of the bytes is
///   kept, so memory per key stays bounded whatever the client sends.
///   The digest is the same in every process: instances sharing a store
///   name a long key alike, with nothing to set up. A client cannot send
///   a short key equal to a digest, since short keys never start with `#`.
///
/// `Display`, `Hash` and `Eq` all use the stored form
/// ([`stored`](Self::stored)), so a remote store sees the same key as a
/// memory store. To look a key up in a table of your own (plans, known
/// API keys), key the table by `HeaderKey::new(text)`: equal keys are
/// equal whatever their length.
///
/// Two long keys collide only if their digests do (a 2^64 birthday
/// search), and that harms only the finder unless one of the two is a
/// victim's token, which the attacker could then simply send.
///
/// A key from [`ApiKey`](super::ApiKey), [`Bearer`](super::Bearer) or a
/// header marked [`secret`](Header::secret) is a secret key
/// ([`is_secret`](Self::is_secret), and `StableKey::is_secret`): a remote
/// store (ratelimit-redis) names it by a hash keyed with its own secret,
/// never by its text or digest, whatever its length.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HeaderKey {
    text: Box<str>,
    secret: bool,
}

/// Longer keys are hashed.
pub(crate) const MAX_INLINE: usize = 64;

impl HeaderKey {
    /// The key of `bytes`: themselves when short and visible ASCII (or
    /// spaces) without a leading `#`, else their keyed hash.
    pub fn new(bytes: &[u8]) -> Self {
        let plain = |b: &u8| b.is_ascii_graphic() || *b == b' ';
        match std::str::from_utf8(bytes) {
            Ok(text)
                if text.len() <= MAX_INLINE
                    && !text.starts_with('#')
                    && text.bytes().all(|b| plain(&b)) =>
            {
                Self {
                    text: text.into(),
                    secret: false,
                }
            }
            _ => Self {
                text: hashed(bytes),
                secret: false,
            },
        }
    }

    /// The key of `bytes`, as [`new`](Self::new), marked secret: a
    /// credential that a remote store must not name in plain text.
    pub fn secret(bytes: &[u8]) -> Self {
        Self {
            secret: true,
            ..Self::new(bytes)
        }
    }

    /// Whether this key carries a credential (see [`secret`](Self::secret)).
    pub fn is_secret(&self) -> bool {
        self.secret
    }

    /// The key as the client sent it, when it is kept: up to 64 bytes of
    /// plain text. `None` for a long key, which keeps only its digest
    /// (see [`stored`](Self::stored); look it up by
    /// `HeaderKey::new(text)`).
    pub fn sent(&self) -> Option<&str> {
        (!self.is_hashed()).then_some(&*self.text)
    }

    /// The key as stores see it: the text the client sent, or for a long
    /// key `#` and the 32 hex digits of its digest.
    pub fn stored(&self) -> &str {
        &self.text
    }

    /// Whether this key is a digest of the original bytes.
    pub fn is_hashed(&self) -> bool {
        self.text.starts_with('#')
    }
}

impl fmt::Display for HeaderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.stored())
    }
}

impl fmt::Debug for HeaderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.stored(), f)
    }
}

/// `s` without leading and trailing spaces and tabs.
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t');
    let start = s.iter().position(|b| !ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// The single value of `name`, trimmed: missing if absent or blank,
/// malformed if repeated, longer than `max_len`, or not visible ASCII
/// (spaces allowed inside when `spaces`).
pub(crate) fn single_value(
    req: &Parts,
    name: &HeaderName,
    max_len: usize,
    spaces: bool,
    secret: bool,
    missing: KeyError,
    malformed: KeyError,
) -> Result<HeaderKey, KeyError> {
    let mut values = req.headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Err(missing);
    };
    if values.next().is_some() {
        return Err(malformed);
    }
    let text = trim(value.as_bytes());
    if text.is_empty() {
        return Err(missing);
    }
    let ok = |b: &u8| b.is_ascii_graphic() || (spaces && *b == b' ');
    if text.len() > max_len || !text.iter().all(ok) {
        return Err(malformed);
    }
    Ok(if secret {
        HeaderKey::secret(text)
    } else {
        HeaderKey::new(text)
    })
}

/// Keys by the value of a request header (a tenant id, a client id...).
///
/// Absent or blank: a missing key. Repeated, longer than 1024 bytes, or
/// containing bytes other than visible ASCII and spaces: malformed. Both
/// answer 400 when rejected.
///
/// The key is a [`HeaderKey`]: the value itself up to 64 bytes, else its
/// digest.
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
    max_len: usize,
    /// `None`: secret if a credential header (see `is_credential`).
    secret: Option<bool>,
}

impl Header {
    /// The header `name`.
    pub const fn new(name: HeaderName) -> Self {
        Self {
            secret: None,
            name,
            max_len: 1024,
        }
    }

    /// The header named `name`; fails if it is not a valid header name.
    pub fn named(name: &str) -> Result<Self, BuildError> {
        HeaderName::try_from(name)
            .map(Self::new)
            .map_err(|_| BuildError::BadHeaderName(name.to_owned()))
    }

    /// Marks the header's values secret (credentials): their keys are
    /// [secret keys](HeaderKey::secret), which a remote store names by a
    /// keyed hash. On by default for `Authorization`,
    /// `Proxy-Authorization`, `Cookie`, `X-API-Key` and `X-Auth-Token`.
    pub const fn secret(mut self, secret: bool) -> Self {
        self.secret = Some(secret);
        self
    }

    /// The longest accepted value (default 1024).
    pub const fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

impl KeyExtractor for Header {
    type Key = HeaderKey;

    fn extract(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        single_value(
            req,
            &self.name,
            self.max_len,
            true,
            self.secret.unwrap_or_else(|| is_credential(&self.name)),
            KeyError::missing("key header"),
            KeyError::malformed("key header"),
        )
    }
}

/// Headers that carry credentials: their values are secret keys unless
/// the app says otherwise ([`Header::secret`]).
pub(crate) fn is_credential(name: &HeaderName) -> bool {
    const CREDENTIALS: [&str; 5] = [
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "x-auth-token",
    ];
    CREDENTIALS.contains(&name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn header_values() {
        let h = Header::named("x-tenant").unwrap();
        let parts = |v: &[&[u8]]| {
            let mut b = http::Request::builder();
            for v in v {
                b = b.header("x-tenant", HeaderValue::from_bytes(v).unwrap());
            }
            b.body(()).unwrap().into_parts().0
        };
        assert_eq!(
            h.extract(&parts(&[b"  acme co "])).unwrap().stored(),
            "acme co"
        );
        assert!(h.extract(&parts(&[])).unwrap_err().is_missing());
        assert!(h.extract(&parts(&[b"   "])).unwrap_err().is_missing());
        assert!(!h.extract(&parts(&[b"a", b"b"])).unwrap_err().is_missing());
        assert!(!h
            .extract(&parts(&[b"caf\xc3\xa9"]))
            .unwrap_err()
            .is_missing());
        assert!(Header::named("bad name").is_err());
        assert!(!h.extract(&parts(&[b"acme"])).unwrap().is_secret());
        let secret = h.clone().secret(true);
        let k = secret.extract(&parts(&[b"acme"])).unwrap();
        assert!(k.is_secret());
        assert_eq!(k.stored(), "acme");
        assert_ne!(k, h.extract(&parts(&[b"acme"])).unwrap());
        let auth = Header::named("x-auth-token").unwrap();
        let p = http::Request::builder()
            .header("x-auth-token", "t")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert!(auth.extract(&p).unwrap().is_secret());
    }

    #[test]
    fn long_or_hash_like_keys_are_hashed() {
        let short = HeaderKey::new(&[b'k'; 64]);
        assert_eq!(short.stored().len(), 64);
        assert!(!short.is_hashed());
        let long = HeaderKey::new(&[b'k'; 65]);
        assert!(long.is_hashed());
        assert_eq!(long.stored().len(), 33);
        assert_eq!(long, HeaderKey::new(&[b'k'; 65]));
        assert_ne!(long, HeaderKey::new(&[b'k'; 66]));
        // A client sending a hashed key's text gets another hash.
        let forged = HeaderKey::new(long.stored().as_bytes());
        assert!(forged.is_hashed());
        assert_ne!(forged, long);
        // Bytes that are not visible ASCII are hashed, never shown.
        assert!(HeaderKey::new(b"caf\xc3\xa9").is_hashed());
        assert!(HeaderKey::new(b"a\tb").is_hashed());
        assert_eq!(HeaderKey::new(b"a b").stored(), "a b");
    }
}
