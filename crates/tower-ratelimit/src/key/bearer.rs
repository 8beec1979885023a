//! The token of `Authorization: Bearer <token>`.

use super::header::HeaderKey;
use super::{KeyError, KeyExtractor};
use http::header::AUTHORIZATION;
use http::request::Parts;
use http::StatusCode;

const MISSING: KeyError = KeyError::missing("bearer token")
    .with_status(StatusCode::UNAUTHORIZED)
    .with_challenge("Bearer");
const MALFORMED: KeyError = KeyError::malformed("bearer token")
    .with_status(StatusCode::BAD_REQUEST)
    .with_challenge("Bearer error=\"invalid_request\"");

/// Keys by the bearer token (RFC 6750) of the `Authorization` header.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::Bearer, Gcra, MemoryStore, RateLimitLayer};
///
/// // 100 per minute per bearer token.
/// let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()), Bearer::new());
/// # let _ = layer;
/// ```
///
/// As RFC 6750 (section 3.1) asks, when rejected:
/// - no `Authorization`, another scheme, or an empty token are *missing*:
///   401 with `WWW-Authenticate: Bearer`;
/// - a repeated header, a token that is not `token68`
///   (`[A-Za-z0-9-._~+/]+=*`) or longer than 4096 bytes are *malformed*:
///   400 with `WWW-Authenticate: Bearer error="invalid_request"`.
///
/// The scheme is matched case-insensitively.
///
/// The key is a secret [`HeaderKey`] ([`HeaderKey::secret`]): in memory,
/// a token of up to 64 bytes is kept as is, a longer one as a keyed hash;
/// a remote store (ratelimit-redis) names it by a keyed hash whatever its
/// length.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bearer {
    _priv: (),
}

impl Bearer {
    /// The bearer token extractor.
    pub const fn new() -> Self {
        Self { _priv: () }
    }
}

fn token68(b: &[u8]) -> bool {
    let body = b.iter().rposition(|&c| c != b'=').map_or(0, |i| i + 1);
    body > 0
        && b[..body]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~+/".contains(c))
}

impl KeyExtractor for Bearer {
    type Key = HeaderKey;

    fn extract(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        let mut values = req.headers.get_all(AUTHORIZATION).iter();
        let value = values.next().ok_or(MISSING)?;
        if values.next().is_some() {
            return Err(MALFORMED);
        }
        let bytes = value.as_bytes();
        let scheme_end = bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len());
        if !bytes[..scheme_end].eq_ignore_ascii_case(b"bearer") {
            return Err(MISSING);
        }
        let start = bytes[scheme_end..]
            .iter()
            .position(|&b| b != b' ')
            .map_or(bytes.len(), |i| scheme_end + i);
        let end = bytes
            .iter()
            .rposition(|&b| !matches!(b, b' ' | b'\t'))
            .map_or(start, |i| (i + 1).max(start));
        if start == end {
            return Err(MISSING);
        }
        if end - start > 4096 || !token68(&bytes[start..end]) {
            return Err(MALFORMED);
        }
        Ok(HeaderKey::secret(&bytes[start..end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extract(v: &[u8]) -> Result<String, KeyError> {
        let p = http::Request::builder()
            .header("authorization", http::HeaderValue::from_bytes(v).unwrap())
            .body(())
            .unwrap()
            .into_parts()
            .0;
        Bearer::new().extract(&p).map(|k| k.to_string())
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(extract(b"Bearer abc.DEF-1~+/==").unwrap(), "abc.DEF-1~+/==");
        assert_eq!(extract(b"bearer   tok  ").unwrap(), "tok");
        let p = http::Request::builder()
            .header("authorization", "Bearer tok")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert!(Bearer::new().extract(&p).unwrap().is_secret());
        for bad in [
            &b"Basic dXNlcjpw"[..],
            b"Bearer",
            b"Bearer   ",
            b"",
            b"Bearerx tok",
        ] {
            let e = extract(bad).unwrap_err();
            assert!(e.is_missing(), "{bad:?}");
            assert_eq!(e.status(), 401);
        }
        for bad in [
            &b"Bearer a b"[..],
            b"Bearer ===",
            b"Bearer caf\xc3\xa9",
            b"Bearer a=b",
        ] {
            let e = extract(bad).unwrap_err();
            assert!(!e.is_missing(), "{bad:?}");
            assert_eq!(e.status(), 400);
            assert_eq!(e.challenge(), Some("Bearer error=\"invalid_request\""));
        }
        let long = format!("Bearer {}", "t".repeat(4097));
        assert_eq!(extract(long.as_bytes()).unwrap_err().status(), 400);
        // Long tokens are hashed; `#` cannot start a short key.
        let long = format!("Bearer {}", "t".repeat(65));
        let k = extract(long.as_bytes()).unwrap();
        assert!(k.starts_with('#') && k.len() == 33, "{k}");
        assert_eq!(extract(long.as_bytes()).unwrap(), k);
        assert_eq!(
            extract(format!("Bearer {}", "t".repeat(64)).as_bytes())
                .unwrap()
                .len(),
            64
        );
        let none = Bearer::new().extract(&http::Request::new(()).into_parts().0);
        assert_eq!(none.unwrap_err().challenge(), Some("Bearer"));
        let twice = http::Request::builder()
            .header("authorization", "Bearer a")
            .header("authorization", "Bearer b")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert_eq!(Bearer::new().extract(&twice).unwrap_err().status(), 400);
    }
}
