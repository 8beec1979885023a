//! An API key header (`X-API-Key` by default).

use super::header::{single_value, HeaderKey};
use super::{KeyError, KeyExtractor};
use http::header::HeaderName;
use http::request::Parts;
use http::StatusCode;

const MISSING: KeyError = KeyError::missing("API key").with_status(StatusCode::UNAUTHORIZED);
const MALFORMED: KeyError = KeyError::malformed("API key");

/// Keys by an API key header.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::ApiKey, Gcra, MemoryStore, RateLimitLayer};
///
/// // 100 per minute per API key (the `X-API-Key` header).
/// let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()), ApiKey::new());
/// # let _ = layer;
/// ```
///
/// Absent or blank: missing (401 when rejected). Repeated, longer than 256
/// bytes, or not visible ASCII without spaces: malformed (400). The key is
/// not checked against anything: authenticate before or after the limit as
/// you prefer.
///
/// The key is a secret [`HeaderKey`] ([`HeaderKey::secret`]): the API key
/// itself up to 64 bytes in memory, else its keyed hash; a remote store
/// (ratelimit-redis) names it by a keyed hash whatever its length.
#[derive(Debug, Clone)]
pub struct ApiKey {
    name: HeaderName,
}

impl Default for ApiKey {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiKey {
    /// `X-API-Key`.
    pub const fn new() -> Self {
        Self::header(HeaderName::from_static("x-api-key"))
    }

    /// Another header.
    pub const fn header(name: HeaderName) -> Self {
        Self { name }
    }

    /// Whether `req` carries a non-blank API key (valid or not).
    pub fn is_present(&self, req: &Parts) -> bool {
        req.headers
            .get(&self.name)
            .is_some_and(|v| v.as_bytes().iter().any(|b| !matches!(b, b' ' | b'\t')))
    }
}

impl KeyExtractor for ApiKey {
    type Key = HeaderKey;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        single_value(req, &self.name, 256, false, true, MISSING, MALFORMED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys() {
        let k = ApiKey::new();
        let p = |v: &[u8]| {
            http::Request::builder()
                .header("x-api-key", http::HeaderValue::from_bytes(v).unwrap())
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        assert_eq!(k.extract(&p(b"k-123")).unwrap().to_string(), "k-123");
        assert!(k.extract(&p(b"k-123")).unwrap().is_secret());
        assert_eq!(k.extract(&p(b"a b")).unwrap_err().status(), 400);
        assert_eq!(k.extract(&p(&[b'x'; 300])).unwrap_err().status(), 400);
        assert_eq!(k.extract(&p(b"")).unwrap_err().status(), 401);
        assert!(!k.is_present(&p(b" ")));
        assert!(k.is_present(&p(b"\xff")));
    }
}
