//! The secret that keys marked secret (API keys, bearer tokens) are hashed
//! with before they become part of a Redis key name, and how every
//! instance sharing a Redis agrees on it.

use siphasher::sip128::{Hasher128, SipHasher24};
use std::fmt::{self, Write as _};
use std::hash::Hasher;
use std::sync::{Mutex, PoisonError};

/// The Redis key holding a store's shared secret: `{prefix}key-secret`.
/// A state key is `{prefix}{...}`, so the two never meet.
pub(crate) const SECRET_SUFFIX: &str = "key-secret";

/// The length of a hashed key's text: `#` and 32 hex digits.
pub(crate) const HASHED_LEN: usize = 33;

/// The one secret of the workspace: keys are named by its keyed hash in
/// Redis. Secret keys (API keys, bearer tokens) and long keys (over 64
/// bytes) never reach Redis as text; their name is `#` and the 32 hex
/// digits of the keyed SipHash-2-4 of the key's text.
///
/// By default you give none: the store shares one through Redis at
/// `{prefix}key-secret` (the first instance writes a random one with `SET
/// NX`, every instance reads it back), so every instance names a key
/// alike. Give one (32 hex digits, 16 bytes) to fix it, the same on every
/// instance (see
/// [`RedisStoreBuilder::key_secret`](crate::RedisStoreBuilder::key_secret)).
///
/// ```
/// use ratelimit_redis::KeySecret;
///
/// let secret: KeySecret = "000102030405060708090a0b0c0d0e0f".parse()?;
/// assert_eq!(format!("{secret:?}"), "KeySecret(..)");
/// assert!("not hex".parse::<KeySecret>().is_err());
/// # Ok::<(), ratelimit_redis::RedisBuildError>(())
/// ```
///
/// `Debug` does not show it; a parse error names the length or the
/// position of the first bad character, never the secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeySecret(pub [u8; 16]);

impl std::str::FromStr for KeySecret {
    type Err = crate::RedisBuildError;

    fn from_str(hex: &str) -> Result<Self, Self::Err> {
        from_hex(hex)
            .map(Self)
            .map_err(crate::RedisBuildError::KeySecret)
    }
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySecret(..)")
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for KeySecret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(d)?;
        hex.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a store's key secret comes from.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum SecretSource {
    /// Given in the settings: the same on every instance, nothing in Redis.
    Fixed([u8; 16]),
    /// Shared through Redis at this key: the first instance to connect
    /// writes a random one (`SET NX`), every instance reads it back.
    Shared(String),
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(_) => f.write_str("Fixed(..)"),
            Self::Shared(key) => f.debug_tuple("Shared").field(key).finish(),
        }
    }
}

/// The secret a store hashes secret keys with: fixed, or the one last read
/// from Redis (cached: a check never reads it).
pub(crate) struct SecretCell {
    source: SecretSource,
    current: Mutex<Option<[u8; 16]>>,
}

impl SecretCell {
    pub(crate) fn new(source: SecretSource) -> Self {
        let current = match &source {
            SecretSource::Fixed(bytes) => Some(*bytes),
            SecretSource::Shared(_) => None,
        };
        Self {
            source,
            current: Mutex::new(current),
        }
    }

    /// The Redis key of a shared secret (`None`: fixed).
    pub(crate) fn redis_key(&self) -> Option<&str> {
        match &self.source {
            SecretSource::Fixed(_) => None,
            SecretSource::Shared(key) => Some(key),
        }
    }

    /// The secret in use, if known yet.
    pub(crate) fn get(&self) -> Option<[u8; 16]> {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What this instance writes with `SET NX`: the secret it has (so that
    /// a Redis that lost it gets the same one back), else a fresh one.
    pub(crate) fn candidate(&self) -> String {
        to_hex(&self.get().unwrap_or_else(random))
    }

    /// Adopts `hex`, the secret read back from Redis; returns whether it
    /// replaced another (some instance wrote a different one first: the
    /// hashed names of secret keys change, and their counts restart).
    pub(crate) fn adopt(&self, hex: &str) -> Result<bool, String> {
        let bytes = from_hex(hex)?;
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let replaced = current.is_some_and(|c| c != bytes);
        *current = Some(bytes);
        Ok(replaced)
    }
}

/// `#` and the 32 hex digits of the keyed SipHash-2-4 (128 bits) of `key`.
pub(crate) fn hashed(secret: &[u8; 16], key: &str) -> String {
    let mut text = String::with_capacity(HASHED_LEN);
    // Writing to a `String` cannot fail.
    let _ = write!(text, "#{:032x}", hash128(secret, key));
    text
}

/// The keyed SipHash-2-4 (128 bits) of `key`.
pub(crate) fn hash128(secret: &[u8; 16], key: &str) -> u128 {
    let mut h = SipHasher24::new_with_key(secret);
    h.write(key.as_bytes());
    h.finish128().as_u128()
}

/// 16 random bytes from the operating system.
pub(crate) fn random() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Never seen on supported systems; std's per-process random hash
        // keys come from the same source.
        use std::hash::BuildHasher;
        for half in bytes.chunks_exact_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write(half);
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes
}

pub(crate) fn to_hex(bytes: &[u8; 16]) -> String {
    bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// 32 hex digits; the error names the length or the position of the first
/// bad character, never the secret.
pub(crate) fn from_hex(hex: &str) -> Result<[u8; 16], String> {
    let hex = hex.trim();
    if hex.len() != 32 {
        return Err(format!("{} characters, expected 32 hex digits", hex.len()));
    }
    let mut bytes = [0u8; 16];
    for (i, pair) in hex.as_bytes().chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => bytes[i] = (hi * 16 + lo) as u8,
            _ => return Err(format!("a non-hex character near position {}", 2 * i)),
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_keyed_fixed_length_hex() {
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let h = hashed(&a, "demo-key-1");
        assert_eq!(h.len(), HASHED_LEN);
        assert!(h.starts_with('#') && h[1..].bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(!h.contains("demo"));
        assert_eq!(h, hashed(&a, "demo-key-1"));
        assert_ne!(h, hashed(&b, "demo-key-1"));
        assert_ne!(h, hashed(&a, "demo-key-2"));
    }

    #[test]
    fn secrets_read_back_and_adopted() {
        let s = SecretCell::new(SecretSource::Shared("p:key-secret".into()));
        assert_eq!(s.get(), None);
        let first = s.candidate();
        assert_eq!(from_hex(&first).unwrap().len(), 16);
        assert!(!s.adopt(&first).unwrap());
        // Once known, the candidate is the secret itself (a restore).
        assert_eq!(s.candidate(), first);
        assert!(s.adopt(&to_hex(&[7; 16])).unwrap());
        assert_eq!(s.get(), Some([7; 16]));
        assert!(s.adopt("xyz").unwrap_err().contains("3 characters"));
        assert!(from_hex(&"g".repeat(32))
            .unwrap_err()
            .contains("position 0"));
        assert_eq!(format!("{:?}", SecretSource::Fixed([1; 16])), "Fixed(..)");
    }
}
