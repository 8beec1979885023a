//! A request header's value as the key, and the [`HeaderKey`] type shared by header-based extractors.

use super::digest::{hashed, HASHED_LEN};
use super::{KeyError, KeyExtractor};
use crate::LayerBuildError;
use http::header::HeaderName;
use http::request::Parts;
#[cfg(doc)]
use ratelimit_core::algorithm::StableKey;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A key read from a header (a value, an API key, a bearer token), owning
/// its bytes: it never keeps the request's buffers alive.
///
/// ```
/// use ratelimit_core::algorithm::StableKey;
/// use tower_ratelimit::key::HeaderKey;
///
/// let short = HeaderKey::new(b"demo-key-1");
/// assert_eq!(short.sent(), Some("demo-key-1"));
/// let jwt = "e".repeat(100);
/// let long = HeaderKey::new(jwt.as_bytes());
/// assert_eq!(long.sent(), Some(jwt.as_str())); // what the client sent
/// assert_eq!(long.stored().len(), 33); // `#` and 32 hex digits
/// // A store keeps the digest only; the copy is the same key.
/// let kept = long.clone().into_stored();
/// assert_eq!(kept.sent(), None);
/// assert_eq!(kept, long);
/// ```
///
/// - Up to 64 bytes of visible ASCII (spaces allowed inside) not starting
///   with `#`: the key is its own text, in one exact-size allocation.
/// - Anything else (longer, or starting with `#`): the key is `#`
///   followed by the 32 hex digits of a 128-bit SipHash-2-4 digest of the
///   bytes ([`stored`](Self::stored)). The digest is the same in every
///   process: instances sharing a store name a long key alike, with
///   nothing to set up. A client cannot send a short key equal to a
///   digest, since short keys never start with `#`.
///
/// [`sent`](Self::sent) gives the text the client sent, whatever its
/// length, for the request's life. What a store keeps is the stored form
/// only ([`StableKey::into_stored`] drops the text), so memory per stored
/// key stays bounded whatever the client sends.
///
/// `Display`, `Hash` and `Eq` all use the stored form, so a remote store
/// sees the same key as a memory store, and a key equals its store's copy.
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
#[derive(Clone)]
pub struct HeaderKey {
    /// The stored form; for a hashed key, followed by the text sent (if
    /// UTF-8) until a store keeps it.
    text: Box<str>,
    secret: bool,
}

/// Longer keys are hashed.
pub(crate) const MAX_INLINE: usize = 64;

impl HeaderKey {
    /// The key of `bytes`: themselves when short and visible ASCII (or
    /// spaces) without a leading `#`, else their digest, with the text
    /// sent beside it.
    pub fn new(bytes: &[u8]) -> Self {
        let plain = |b: &u8| b.is_ascii_graphic() || *b == b' ';
        let text = match std::str::from_utf8(bytes) {
            Ok(text)
                if text.len() <= MAX_INLINE
                    && !text.starts_with('#')
                    && text.bytes().all(|b| plain(&b)) =>
            {
                text.into()
            }
            sent => {
                let sent = sent.unwrap_or_default();
                let mut text = String::with_capacity(HASHED_LEN + sent.len());
                text.push_str(&hashed(bytes));
                text.push_str(sent);
                text.into_boxed_str()
            }
        };
        Self {
            text,
            secret: false,
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

    /// The key as the client sent it, whatever its length. `None` for a
    /// store's copy of a hashed key (it keeps the digest only), and for
    /// bytes that are not UTF-8 (the built-in extractors accept visible
    /// ASCII only).
    pub fn sent(&self) -> Option<&str> {
        match self.is_hashed() {
            false => Some(&self.text),
            true => self.text.get(HASHED_LEN..).filter(|s| !s.is_empty()),
        }
    }

    /// The key as stores see it: the text the client sent, or for a long
    /// key `#` and the 32 hex digits of its digest.
    #[inline]
    pub fn stored(&self) -> &str {
        match self.is_hashed() {
            false => &self.text,
            true => self.text.get(..HASHED_LEN).unwrap_or(&self.text),
        }
    }

    /// Whether this key is a digest of the original bytes.
    #[inline]
    pub fn is_hashed(&self) -> bool {
        self.text.starts_with('#')
    }

    /// The stored form alone: what [`StableKey::into_stored`] gives.
    pub(crate) fn into_digest(self) -> Self {
        if self.text.len() <= HASHED_LEN || !self.is_hashed() {
            return self;
        }
        Self {
            text: self.stored().into(),
            secret: self.secret,
        }
    }
}

impl PartialEq for HeaderKey {
    fn eq(&self, other: &Self) -> bool {
        self.stored() == other.stored() && self.secret == other.secret
    }
}

impl Eq for HeaderKey {}

impl Hash for HeaderKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.stored().hash(state);
        self.secret.hash(state);
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
/// ```
/// use tower_ratelimit::key::{Header, HeaderKey, KeyExtractor};
///
/// let tenant = "x-tenant".parse::<Header>().unwrap();
/// let req = http::Request::get("/").header("x-tenant", "acme").body(()).unwrap();
/// assert_eq!(tenant.extract(&req.into_parts().0).unwrap(), HeaderKey::new(b"acme"));
/// let bare = http::Request::get("/").body(()).unwrap();
/// assert!(tenant.extract(&bare.into_parts().0).unwrap_err().is_missing());
/// ```
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
    /// The header `name` (a name as text parses with [`str::parse`]).
    pub const fn new(name: HeaderName) -> Self {
        Self {
            secret: None,
            name,
            max_len: 1024,
        }
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

impl std::str::FromStr for Header {
    type Err = LayerBuildError;

    /// The header named `name`; fails if it is not a valid header name.
    fn from_str(name: &str) -> Result<Self, LayerBuildError> {
        HeaderName::try_from(name)
            .map(Self::new)
            .map_err(|_| LayerBuildError::BadHeaderName(name.to_owned()))
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
        let h = "x-tenant".parse::<Header>().unwrap();
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
        assert!("bad name".parse::<Header>().is_err());
        assert!(!h.extract(&parts(&[b"acme"])).unwrap().is_secret());
        let secret = h.clone().secret(true);
        let k = secret.extract(&parts(&[b"acme"])).unwrap();
        assert!(k.is_secret());
        assert_eq!(k.stored(), "acme");
        assert_ne!(k, h.extract(&parts(&[b"acme"])).unwrap());
        let auth = "x-auth-token".parse::<Header>().unwrap();
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

    #[test]
    fn a_hashed_key_keeps_the_text_sent_until_stored() {
        use ratelimit_core::algorithm::StableKey;
        use std::hash::BuildHasher;

        let text = "j".repeat(200);
        let long = HeaderKey::secret(text.as_bytes());
        assert_eq!(long.sent(), Some(text.as_str()));
        assert_eq!(long.stored().len(), HASHED_LEN);
        assert_eq!(long.to_string(), long.stored());
        let kept = long.clone().into_stored();
        assert_eq!(kept.sent(), None);
        assert_eq!(kept.stored(), long.stored());
        assert!(kept.is_secret() && kept.is_hashed());
        assert_eq!(kept, long);
        let h = std::hash::RandomState::new();
        assert_eq!(h.hash_one(&kept), h.hash_one(&long));
        assert_eq!(
            ratelimit_core::algorithm::stable_hash(&kept),
            ratelimit_core::algorithm::stable_hash(&long)
        );
        // A key starting with `#` and one with bytes not shown are hashed;
        // their text is kept when it is UTF-8.
        assert_eq!(HeaderKey::new(b"#tag").sent(), Some("#tag"));
        assert_eq!(HeaderKey::new(b"caf\xc3\xa9").sent(), Some("caf\u{e9}"));
        assert_eq!(HeaderKey::new(b"\xff\xfe").sent(), None);
        // A short key is its own stored form.
        let short = HeaderKey::new(b"acme");
        assert_eq!(short.clone().into_stored().sent(), Some("acme"));
    }
}
