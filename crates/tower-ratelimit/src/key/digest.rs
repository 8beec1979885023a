//! The digest that names a long key: `#` and the 32 hex digits of a
//! 128-bit SipHash-2-4 under a fixed, public key, the same in every
//! process.

use siphasher::sip128::{Hasher128, SipHasher24};
use std::fmt::Write as _;
use std::hash::Hasher;

/// The digest's key: fixed, so that every instance names a long key
/// alike with no secret to share. A remote store that names keys in a
/// shared place hashes a secret key again with a secret of its own
/// (ratelimit-redis's `KeySecret`, shared through Redis).
const DIGEST_KEY: [u8; 16] = *b"ratelimit-digest";

/// The length of a hashed key's text: `#` and 32 hex digits.
pub(crate) const HASHED_LEN: usize = 33;

/// `#` and the 32 hex digits of the 128-bit digest of `bytes`.
pub(crate) fn hashed(bytes: &[u8]) -> Box<str> {
    let mut h = SipHasher24::new_with_key(&DIGEST_KEY);
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
    fn hashes_are_fixed_length_hex() {
        let a = hashed(b"a long token");
        assert_eq!(a.len(), HASHED_LEN);
        assert!(a.starts_with('#'));
        assert!(a[1..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, hashed(b"a long token"));
        assert_ne!(a, hashed(b"a long tokem"));
    }

    /// The same in every process: a fixed value (a change of the digest
    /// renames every long key in a shared store, and must be seen).
    #[test]
    fn the_digest_is_the_same_everywhere() {
        assert_eq!(
            &*hashed(b"a long token"),
            "#26353ccda242ddd8daa769abb73209b6"
        );
    }
}
