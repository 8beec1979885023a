//! The process-wide secret long keys are hashed with ([`KeySecret`]).

use crate::BuildError;
use siphasher::sip128::{Hasher128, SipHasher24};
use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
use std::sync::OnceLock;

static SECRET: OnceLock<[u8; 16]> = OnceLock::new();

/// The secret key of the 128-bit SipHash-2-4 that turns keys longer than
/// 64 bytes into `#` + 32 hex digits (see [`HeaderKey`](super::HeaderKey)).
///
/// By default it is random, drawn from the operating system the first time
/// a long key is hashed: fine for one process. Instances that share a
/// remote store (Redis) must hash a long token to the same store key, so
/// they must share the secret: read it from your configuration and
/// [`install`](Self::install) it at startup, before the first request.
///
/// ```
/// use tower_ratelimit::key::KeySecret;
///
/// // In an app: std::env::var("RATE_LIMIT_KEY_SECRET").
/// let secret: KeySecret = "000102030405060708090a0b0c0d0e0f".parse().unwrap();
/// secret.install().unwrap();
/// ```
///
/// Keep it secret: whoever knows it can search for two long tokens that
/// share a key. `Debug` does not show it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeySecret([u8; 16]);

impl KeySecret {
    /// These 16 bytes.
    pub const fn new(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// Parses 32 hex digits (either case); the error names the length and
    /// the first bad character, never the secret.
    pub fn from_hex(hex: &str) -> Result<Self, BuildError> {
        let hex = hex.trim();
        let bad = |why: String| Err(BuildError::BadKeySecret(why));
        if hex.len() != 32 {
            return bad(format!("{} characters, expected 32 hex digits", hex.len()));
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in hex.as_bytes().chunks_exact(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(hi), Some(lo)) => bytes[i] = (hi * 16 + lo) as u8,
                _ => return bad(format!("a non-hex character near position {}", 2 * i)),
            }
        }
        Ok(Self(bytes))
    }

    /// A random secret from the operating system (what a process uses
    /// unless one is installed). To share one, store [`to_hex`](Self::to_hex)
    /// where every instance can read it.
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut bytes) {
            // Never seen on supported systems; std's per-process random
            // hash keys come from the same source, so fall back to them.
            tracing::warn!(error = %e, "no OS randomness for the key secret; using std's");
            for half in bytes.chunks_exact_mut(8) {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write(half);
                half.copy_from_slice(&h.finish().to_le_bytes());
            }
        }
        Self(bytes)
    }

    /// The secret as 32 lower-case hex digits, to share it with other
    /// instances ([`from_hex`](Self::from_hex) reads it back). Treat the
    /// text as a secret.
    pub fn to_hex(&self) -> String {
        self.0.iter().fold(String::with_capacity(32), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// Makes this the process's secret. Fails if another secret is already
    /// in use: installed before, or drawn at random because a long key was
    /// hashed first (keys hashed so far would no longer match). Installing
    /// the same secret again succeeds.
    pub fn install(self) -> Result<(), BuildError> {
        let current = SECRET.get_or_init(|| self.0);
        if *current == self.0 {
            Ok(())
        } else {
            Err(BuildError::KeySecretAlreadySet)
        }
    }
}

impl FromStr for KeySecret {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<Self, BuildError> {
        Self::from_hex(s)
    }
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySecret(..)")
    }
}

/// The installed secret, or a random one.
fn secret() -> &'static [u8; 16] {
    SECRET.get_or_init(|| KeySecret::random().0)
}

/// The length of a hashed key's text: `#` and 32 hex digits.
pub(crate) const HASHED_LEN: usize = 33;

/// `#` and the 32 hex digits of the keyed 128-bit hash of `bytes`.
pub(crate) fn hashed(bytes: &[u8]) -> Box<str> {
    let mut h = SipHasher24::new_with_key(secret());
    h.write(bytes);
    let digest = h.finish128().as_u128();
    let mut text = String::with_capacity(HASHED_LEN);
    // Writing to a `String` cannot fail.
    let _ = write!(text, "#{digest:032x}");
    text.into_boxed_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_secrets() {
        let s = KeySecret::from_hex("000102030405060708090A0B0C0D0E0f").unwrap();
        assert_eq!(s, KeySecret::new(std::array::from_fn(|i| i as u8)));
        assert_eq!(format!("{s:?}"), "KeySecret(..)");
        assert_eq!(s.to_hex(), "000102030405060708090a0b0c0d0e0f");
        let r = KeySecret::random();
        assert_eq!(KeySecret::from_hex(&r.to_hex()).unwrap(), r);
        assert_ne!(KeySecret::random(), r);
        for bad in ["", "00", "zz0102030405060708090a0b0c0d0e0f"] {
            let e = KeySecret::from_hex(bad).unwrap_err();
            assert!(matches!(e, BuildError::BadKeySecret(_)), "{bad}");
        }
        assert!("x".parse::<KeySecret>().is_err());
    }

    #[test]
    fn hashes_are_fixed_length_hex() {
        let a = hashed(b"a long token");
        assert_eq!(a.len(), HASHED_LEN);
        assert!(a.starts_with('#'));
        assert!(a[1..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, hashed(b"a long token"));
        assert_ne!(a, hashed(b"a long tokem"));
    }
}
