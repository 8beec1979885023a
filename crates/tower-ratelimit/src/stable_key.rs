//! [`StableKey`] for the keys of [`key`](crate::key): each hashes its
//! `Display` text, the text a remote store (Redis) renders the key as, so a
//! fixed window's per-key offset ([`Anchor::KeyOffset`]) is the same in
//! memory and remotely.
//!
//! [`Anchor::KeyOffset`]: ratelimit_core::algorithm::Anchor::KeyOffset

use crate::key::{CompositeKey, GlobalKey, HeaderKey, IpKey, RouteKey};
use ratelimit_core::algorithm::{StableHasher, StableKey};
use std::fmt::{self, Write};

/// Hashes `key`'s `Display` text (no allocation).
fn write_text(key: &impl fmt::Display, h: &mut StableHasher) {
    // `StableHasher`'s `fmt::Write` never fails.
    let _ = write!(h, "{key}");
}

macro_rules! by_text {
    ($($t:ty),*) => {$(
        impl StableKey for $t {
            fn write_stable(&self, h: &mut StableHasher) {
                write_text(self, h);
            }
        }
    )*};
}

by_text!(GlobalKey, IpKey, RouteKey);

impl StableKey for HeaderKey {
    fn write_stable(&self, h: &mut StableHasher) {
        write_text(self, h);
    }

    /// An API key's, a bearer token's, a secret header's.
    fn is_secret(&self) -> bool {
        HeaderKey::is_secret(self)
    }

    /// The digest alone for a long key: the text sent is dropped.
    fn into_stored(self) -> Self {
        self.into_digest()
    }
}

impl<A: fmt::Display + StableKey, B: fmt::Display + StableKey> StableKey for CompositeKey<A, B> {
    fn write_stable(&self, h: &mut StableHasher) {
        write_text(self, h);
    }

    /// Either part's secret: the pair then is too.
    fn is_secret(&self) -> bool {
        self.0.is_secret() || self.1.is_secret()
    }

    fn into_stored(self) -> Self {
        CompositeKey(self.0.into_stored(), self.1.into_stored())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::algorithm::stable_hash;
    use std::net::Ipv4Addr;

    #[test]
    fn keys_hash_their_text() {
        assert_eq!(stable_hash(&GlobalKey), stable_hash("global"));
        let pair = CompositeKey(GlobalKey, 7u32);
        assert_eq!(stable_hash(&pair), stable_hash("global|7"));
        let ip = IpKey::V4 {
            net: Ipv4Addr::new(192, 0, 2, 1),
            prefix: 32,
        };
        assert_eq!(stable_hash(&ip), stable_hash("192.0.2.1"));
    }
}
