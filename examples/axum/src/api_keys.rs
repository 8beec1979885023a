//! The API keys `GET /api/items` and `POST /v1/chat` accept (`API_KEYS`).

use axum::http::request::Parts;
use std::collections::HashSet;
use std::sync::Arc;
use tower_ratelimit::key::{ApiKey, HeaderKey, KeyError, KeyExtractor};
use tower_ratelimit::serve::EnvError;

/// The `WWW-Authenticate` challenge sent with a 401 for an unknown key.
pub const API_KEY_CHALLENGE: &str = "ApiKey realm=\"axum-example\"";

/// The valid API keys. Only these get a token bucket of their own; a
/// request with any other key is answered 401 (after counting against
/// its client IP's anonymous limit, so guessing keys is limited too).
///
/// The default is no keys at all: every `X-API-Key` is refused until
/// `API_KEYS` lists some. `Debug` shows how many keys there are, never
/// the keys.
#[derive(Clone, Default)]
pub struct ApiKeys(Arc<HashSet<String>>);

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
        let listed = list.split(',').map(str::trim).enumerate();
        for (i, key) in listed.filter(|(_, key)| !key.is_empty()) {
            let (n, max) = (i + 1, Self::MAX_LEN);
            if key.len() > max || !key.bytes().all(|b| b.is_ascii_graphic()) {
                let why = format!("key {n} of the list: not 1 to {max} visible ASCII characters");
                return Err(EnvError::new("API_KEYS", None, why));
            }
            keys.insert(key.to_owned());
        }
        Ok(Self(Arc::new(keys)))
    }

    /// Reads `API_KEYS` (unset: no keys), and logs how many.
    pub fn from_env() -> Result<Self, EnvError> {
        let list = std::env::var_os("API_KEYS").unwrap_or_default();
        let keys = Self::parse(&list.to_string_lossy())?;
        match keys.len() {
            0 => tracing::info!("no API keys (API_KEYS): every X-API-Key is answered 401"),
            n => tracing::info!(api_keys = n, "API keys loaded (API_KEYS)"),
        }
        Ok(keys)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The request's API key if it is a valid one. No key, or an unknown
    /// one: missing (the per-key limit steps aside); a malformed header:
    /// malformed (400).
    pub fn known(&self, req: &Parts) -> Result<HeaderKey, KeyError> {
        let key = ApiKey::new().extract(req)?;
        // The header's own text: a key over 64 bytes is named by its hash.
        let sent = req.headers.get("x-api-key").and_then(|v| v.to_str().ok());
        match sent {
            Some(text) if self.0.contains(text.trim()) => Ok(key),
            _ => Err(KeyError::missing("known API key")),
        }
    }

    /// Whether the request carries a key that is not valid.
    pub fn is_unknown(&self, req: &Parts) -> bool {
        ApiKey::new().is_present(req) && self.known(req).is_err()
    }
}
