//! A hash of a key that is the same in every process (FNV-1a), for per-key
//! window offsets that every instance of a fleet agrees on.

use std::hash::{Hash, Hasher};

/// Hashes `key` with FNV-1a over its [`Hash`] bytes. Unlike the store's
/// randomly seeded hasher, it gives the same value in every process, so
/// per-key offsets agree across instances.
pub fn stable_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = Fnv1a(0xcbf2_9ce4_8422_2325);
    key.hash(&mut h);
    h.finish()
}

struct Fnv1a(u64);

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_deterministic() {
        assert_eq!(super::stable_hash("a"), super::stable_hash("a"));
        assert_ne!(super::stable_hash("a"), super::stable_hash("b"));
    }
}
