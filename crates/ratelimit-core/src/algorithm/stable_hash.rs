//! A hash of a key that is the same in every process, on every platform
//! and with every compiler (FNV-1a over explicit bytes), for per-key window
//! offsets that every instance of a fleet agrees on.
//!
//! It does not go through [`Hash`](std::hash::Hash): what `Hash` feeds a
//! hasher (native-endian integers, length prefixes, the terminator after a
//! string) is not promised stable across Rust versions or platforms. A key
//! says which bytes it is made of through [`StableKey`] instead.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;

/// Hashes `key` with 64-bit FNV-1a over the bytes its [`StableKey`] impl
/// writes. Unlike the store's randomly seeded hasher, it gives the same
/// value in every process, so per-key offsets agree across instances; the
/// bytes are fixed (a string's UTF-8, an integer's little-endian bytes),
/// so they do not move with the compiler either.
///
/// ```
/// use ratelimit_core::algorithm::stable_hash;
/// assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
/// assert_eq!(stable_hash("a"), stable_hash(&String::from("a")));
/// assert_eq!(stable_hash(&1u32), stable_hash(&[1u8, 0, 0, 0][..]));
/// ```
pub fn stable_hash<K: StableKey + ?Sized>(key: &K) -> u64 {
    let mut h = StableHasher::new();
    key.write_stable(&mut h);
    h.finish()
}

/// 64-bit FNV-1a over the bytes written: what [`stable_hash`] runs.
///
/// ```
/// use ratelimit_core::algorithm::{stable_hash, StableHasher};
/// use std::fmt::Write as _;
///
/// let mut h = StableHasher::new();
/// write!(h, "{}", "alice").unwrap();
/// assert_eq!(h.finish(), stable_hash("alice"));
/// ```
///
/// It also implements [`fmt::Write`], so a key can write its `Display`
/// text without allocating: `write!(h, "{key}")` hashes the same as
/// `h.write(key.to_string().as_bytes())`.
#[derive(Debug, Clone)]
pub struct StableHasher(u64);

impl StableHasher {
    /// The FNV-1a offset basis.
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    /// Feeds `bytes`.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash of everything written so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for StableHasher {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write(s.as_bytes());
        Ok(())
    }
}

/// A key whose bytes are fixed: what [`stable_hash`] (and so a fixed
/// window's [`Anchor::KeyOffset`](crate::algorithm::Anchor::KeyOffset)) hashes.
///
/// Strings write their UTF-8 bytes, byte slices themselves, integers their
/// little-endian bytes (`usize` and `isize` as 8 bytes), IP addresses their
/// octets, `()` nothing; references and smart pointers their target. A key
/// rendered as text by a remote store should write the same text, so that
/// both derive the same offset: `write!(h, "{self}")` through
/// [`StableHasher`]'s `fmt::Write` does that.
///
/// ```
/// use ratelimit_core::algorithm::{stable_hash, StableHasher, StableKey};
/// use std::fmt::Write;
///
/// struct Tenant(u32);
/// impl std::fmt::Display for Tenant {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "tenant-{}", self.0)
///     }
/// }
/// impl StableKey for Tenant {
///     fn write_stable(&self, h: &mut StableHasher) {
///         let _ = write!(h, "{self}");
///     }
/// }
/// assert_eq!(stable_hash(&Tenant(7)), stable_hash("tenant-7"));
/// ```
pub trait StableKey {
    /// Writes the key's bytes to `h`.
    fn write_stable(&self, h: &mut StableHasher);

    /// Whether the key carries a credential (an API key, a bearer token,
    /// a header marked secret): a remote store then names it by a keyed
    /// hash, never by its text (ratelimit-redis does). Default `false`.
    fn is_secret(&self) -> bool {
        false
    }

    /// The form a store keeps of the key when it inserts it: by default
    /// the key itself. A key that carries more than its identity for its
    /// request's life drops the rest here, so that memory per stored key
    /// stays bounded (tower-ratelimit's `HeaderKey` keeps the text a
    /// client sent beside a long key's digest, and a store keeps only the
    /// digest). The stored form must hash, compare and display as the key
    /// does.
    ///
    /// ```
    /// use ratelimit_core::algorithm::StableKey;
    ///
    /// assert_eq!(String::from("alice").into_stored(), "alice");
    /// ```
    #[inline(always)]
    fn into_stored(self) -> Self
    where
        Self: Sized,
    {
        self
    }
}

impl StableKey for str {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self.as_bytes());
    }
}

impl StableKey for String {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self.as_bytes());
    }
}

impl StableKey for [u8] {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self);
    }
}

impl<const N: usize> StableKey for [u8; N] {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self);
    }
}

impl StableKey for Vec<u8> {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self);
    }
}

impl StableKey for () {
    fn write_stable(&self, _: &mut StableHasher) {}
}

macro_rules! little_endian {
    ($($t:ty),*) => {$(
        impl StableKey for $t {
            fn write_stable(&self, h: &mut StableHasher) {
                h.write(&self.to_le_bytes());
            }
        }
    )*};
}

little_endian!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128);

impl StableKey for usize {
    fn write_stable(&self, h: &mut StableHasher) {
        // 8 bytes on every platform.
        h.write(&(*self as u64).to_le_bytes());
    }
}

impl StableKey for isize {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(&(*self as i64).to_le_bytes());
    }
}

impl StableKey for Ipv4Addr {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(&self.octets());
    }
}

impl StableKey for Ipv6Addr {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(&self.octets());
    }
}

impl StableKey for IpAddr {
    fn write_stable(&self, h: &mut StableHasher) {
        match self {
            IpAddr::V4(a) => a.write_stable(h),
            IpAddr::V6(a) => a.write_stable(h),
        }
    }
}

impl<T: StableKey + ?Sized> StableKey for &T {
    fn write_stable(&self, h: &mut StableHasher) {
        (**self).write_stable(h);
    }
    fn is_secret(&self) -> bool {
        (**self).is_secret()
    }
}

impl<T: StableKey + ?Sized> StableKey for Box<T> {
    fn write_stable(&self, h: &mut StableHasher) {
        (**self).write_stable(h);
    }
    fn is_secret(&self) -> bool {
        (**self).is_secret()
    }
}

impl<T: StableKey + ?Sized> StableKey for Arc<T> {
    fn write_stable(&self, h: &mut StableHasher) {
        (**self).write_stable(h);
    }
    fn is_secret(&self) -> bool {
        (**self).is_secret()
    }
}

impl<T: StableKey + ?Sized> StableKey for Rc<T> {
    fn write_stable(&self, h: &mut StableHasher) {
        (**self).write_stable(h);
    }
    fn is_secret(&self) -> bool {
        (**self).is_secret()
    }
}

impl<T: StableKey + ToOwned + ?Sized> StableKey for Cow<'_, T> {
    fn write_stable(&self, h: &mut StableHasher) {
        (**self).write_stable(h);
    }
    fn is_secret(&self) -> bool {
        (**self).is_secret()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic() {
        assert_eq!(stable_hash("a"), stable_hash("a"));
        assert_ne!(stable_hash("a"), stable_hash("b"));
    }

    /// Fixed vectors: a change of compiler, platform or of this code that
    /// moves a key's hash (and so its window offset) fails here.
    #[test]
    fn fixed_vectors() {
        // FNV-1a's published vectors.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash("foobar"), 0x8594_4171_f739_67e8);
        // Keys as the stores see them.
        let text = [
            ("user-1", 0xf84b_a2aa_754a_4bd4u64),
            ("10.0.0.1", 0x87f7_ef5d_e06f_f78d),
            ("k", 0xaf63_e64c_8601_fd8a),
        ];
        for (key, want) in text {
            assert_eq!(stable_hash(key), want, "{key:?}");
            assert_eq!(stable_hash(&key.to_owned()), want, "{key:?}");
            assert_eq!(stable_hash(key.as_bytes()), want, "{key:?}");
        }
        assert_eq!(stable_hash(&()), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(&7u64), 0x4bd7_a317_074c_5b62);
        assert_eq!(stable_hash(&7usize), stable_hash(&7u64));
        assert_eq!(stable_hash(&-1i32), stable_hash(&[0xffu8; 4]));
        assert_eq!(stable_hash(&0x0102_0304u32), stable_hash(&[4u8, 3, 2, 1]));
        let v4 = Ipv4Addr::new(192, 0, 2, 1);
        assert_eq!(stable_hash(&v4), stable_hash(&[192u8, 0, 2, 1]));
        assert_eq!(stable_hash(&IpAddr::V4(v4)), stable_hash(&v4));
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(stable_hash(&IpAddr::V6(v6)), 0xf971_61b7_a3be_1c14);
    }
}
