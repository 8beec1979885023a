//! The API keys `GET /api/items` accepts (`API_KEYS`).

use crate::server::EnvError;
use axum::http::request::Parts;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use tower_ratelimit::key::{ApiKey, HeaderKey, KeyError, KeyExtractor};

/// The `WWW-Authenticate` challenge sent with a 401 for an unknown key.
pub const API_KEY_CHALLENGE: &str = "ApiKey realm=\"axum-example\"";

/// The header the keys come in, as [`ApiKey::new`] reads it.
const API_KEY_HEADER: &str = "x-api-key";

/// The valid API keys. Only these get a token bucket of their own; a
/// request with any other key is answered 401 (after counting against
/// its client IP's anonymous limit, so guessing keys is limited too).
///
/// The default is no keys at all: every `X-API-Key` is refused until
/// `API_KEYS` lists some. `Debug` shows how many keys there are, never
/// the keys.
#[derive(Clone, Default)]
pub struct ApiKeys(Arc<HashSet<Box<str>>>);

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKeys({} keys)", self.len())
    }
}

impl ApiKeys {
    /// The longest key accepted, as [`ApiKey`] reads them.
    pub const MAX_LEN: usize = 256;

    /// Parses a comma-separated list (the value of `API_KEYS`). Blanks
    /// around keys and empty elements are skipped; a key longer than
    /// [`MAX_LEN`](Self::MAX_LEN) bytes or with anything but visible ASCII
    /// is an error telling its position (not the key, which is a secret).
    pub fn parse(list: &str) -> Result<Self, EnvError> {
        let mut keys = HashSet::new();
        for (i, key) in list.split(',').map(str::trim).enumerate() {
            if key.is_empty() {
                continue;
            }
            if key.len() > Self::MAX_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(EnvError::new(
                    "API_KEYS",
                    None,
                    format!(
                        "key {} of the list is not 1 to {} visible ASCII characters",
                        i + 1,
                        Self::MAX_LEN
                    ),
                ));
            }
            keys.insert(Box::from(key));
        }
        Ok(Self(Arc::new(keys)))
    }

    /// Reads `API_KEYS`; unset: no keys.
    pub fn from_env() -> Result<Self, EnvError> {
        match std::env::var("API_KEYS") {
            Ok(list) => Self::parse(&list),
            Err(std::env::VarError::NotPresent) => Ok(Self::default()),
            Err(e) => Err(EnvError::new("API_KEYS", None, e)),
        }
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `key` is one of them.
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }

    /// The request's API key if it is a valid one. No key, or an unknown
    /// one: missing (the per-key limit steps aside); a malformed header:
    /// malformed (400).
    pub fn known(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        let key = ApiKey::new().extract(req)?;
        // The header's own text: a key over 64 bytes is named by its hash,
        // which the list does not hold.
        let sent = req
            .headers
            .get(API_KEY_HEADER)
            .and_then(|v| v.to_str().ok());
        if sent.is_some_and(|text| self.contains(text.trim())) {
            Ok(key)
        } else {
            Err(KeyError::missing("known API key"))
        }
    }

    /// Whether the request carries a key that is not valid.
    pub fn is_unknown(&self, req: &Parts) -> bool {
        ApiKey::new().is_present(req) && self.known(req).is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        let keys = ApiKeys::parse(" demo-key-1, ,demo-key-2,,").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.contains("demo-key-1") && keys.contains("demo-key-2"));
        assert!(!keys.contains("demo-key-3") && !keys.contains(""));
        assert!(ApiKeys::parse("").unwrap().is_empty());
        assert!(ApiKeys::default().is_empty());
        for bad in ["ok,a b", "ok,caf\u{e9}", &"k".repeat(257)] {
            let e = ApiKeys::parse(bad).unwrap_err();
            assert_eq!(e.variable, "API_KEYS");
            assert_eq!(e.value, None, "keys are secrets");
            assert!(!e.to_string().contains("a b"), "{e}");
        }
        assert!(ApiKeys::parse(&"k".repeat(256)).is_ok());
        assert_eq!(format!("{keys:?}"), "ApiKeys(2 keys)");
    }

    #[test]
    fn only_listed_keys_are_keys() {
        let keys = ApiKeys::parse("demo-key-1").unwrap();
        let req = |key: Option<&[u8]>| {
            let mut b = axum::http::Request::builder();
            if let Some(k) = key {
                b = b.header("x-api-key", axum::http::HeaderValue::from_bytes(k).unwrap());
            }
            b.body(()).unwrap().into_parts().0
        };
        let listed = req(Some(b"demo-key-1"));
        assert_eq!(keys.known(&listed).unwrap().stored(), "demo-key-1");
        assert!(!keys.is_unknown(&listed));
        // Unknown: no key for the per-key limit (no state), but a 401.
        let made_up = req(Some(b"demo-key-3"));
        assert!(keys.known(&made_up).unwrap_err().is_missing());
        assert!(keys.is_unknown(&made_up));
        // Absent or blank: anonymous, not unknown.
        for anonymous in [req(None), req(Some(b"  "))] {
            assert!(keys.known(&anonymous).unwrap_err().is_missing());
            assert!(!keys.is_unknown(&anonymous));
        }
        // A listed key over 64 bytes, which the limit names by its hash.
        let long = "k".repeat(ApiKeys::MAX_LEN);
        let keys = ApiKeys::parse(&format!("demo-key-1,{long}")).unwrap();
        let sent = req(Some(format!(" {long} ").as_bytes()));
        assert!(keys.known(&sent).unwrap().is_hashed());
        assert!(!keys.is_unknown(&sent));
        assert!(keys.is_unknown(&req(Some("k".repeat(200).as_bytes()))));
        // Malformed: 400 from the per-key limit.
        let e = keys.known(&req(Some(b"a b"))).unwrap_err();
        assert!(!e.is_missing());
        assert_eq!(e.status(), 400);
    }
}
