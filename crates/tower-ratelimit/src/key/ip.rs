//! IP keys: IPv4 addresses and IPv6 prefixes, with IPv4-mapped addresses normalised.

use crate::BuildError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A client's IP address as a key: `Copy`, 20 bytes, no allocation.
///
/// IPv6 clients usually own a whole /64, so by default an IPv6 address is
/// keyed by its /64 prefix: rotating addresses inside it does not escape the
/// limit. IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) are keyed as the
/// IPv4 address. `Display` shows `1.2.3.4` or `2001:db8::/64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpKey {
    /// An IPv4 network (a single address when the prefix is 32).
    V4 {
        /// The address, masked to the prefix.
        net: Ipv4Addr,
        /// The prefix length.
        prefix: u8,
    },
    /// An IPv6 network.
    V6 {
        /// The address, masked to the prefix.
        net: Ipv6Addr,
        /// The prefix length.
        prefix: u8,
    },
}

impl IpKey {
    /// The network as an address (masked to the prefix).
    pub fn addr(&self) -> IpAddr {
        match *self {
            Self::V4 { net, .. } => IpAddr::V4(net),
            Self::V6 { net, .. } => IpAddr::V6(net),
        }
    }
}

impl fmt::Display for IpKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::V4 { net, prefix: 32 } => write!(f, "{net}"),
            Self::V4 { net, prefix } => write!(f, "{net}/{prefix}"),
            Self::V6 { net, prefix: 128 } => write!(f, "{net}"),
            Self::V6 { net, prefix } => write!(f, "{net}/{prefix}"),
        }
    }
}

/// How much of an address forms the key: /32 for IPv4 and /64 for IPv6 by
/// default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPrefixes {
    v4: u8,
    v6: u8,
}

impl Default for IpPrefixes {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl IpPrefixes {
    /// IPv4 /32, IPv6 /64.
    pub const DEFAULT: Self = Self { v4: 32, v6: 64 };

    /// Custom prefix lengths: IPv4 in `1..=32`, IPv6 in `1..=128`.
    pub const fn new(v4: u8, v6: u8) -> Result<Self, BuildError> {
        if v4 == 0 || v4 > 32 {
            return Err(BuildError::BadPrefix {
                family: "IPv4",
                prefix: v4,
            });
        }
        if v6 == 0 || v6 > 128 {
            return Err(BuildError::BadPrefix {
                family: "IPv6",
                prefix: v6,
            });
        }
        Ok(Self { v4, v6 })
    }

    /// The IPv4 prefix length.
    pub const fn v4(&self) -> u8 {
        self.v4
    }

    /// The IPv6 prefix length.
    pub const fn v6(&self) -> u8 {
        self.v6
    }

    /// The key of `ip`.
    #[inline]
    pub fn key(&self, ip: IpAddr) -> IpKey {
        match normalize(ip) {
            // The default: the address itself, with nothing to mask.
            IpAddr::V4(a) if self.v4 == 32 => IpKey::V4 { net: a, prefix: 32 },
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.v4)).unwrap_or(0);
                IpKey::V4 {
                    net: Ipv4Addr::from(u32::from(a) & mask),
                    prefix: self.v4,
                }
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.v6)).unwrap_or(0);
                IpKey::V6 {
                    net: Ipv6Addr::from(u128::from(a) & mask),
                    prefix: self.v6,
                }
            }
        }
    }
}

/// IPv4-mapped IPv6 addresses become IPv4.
#[inline]
pub(crate) fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(a),
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v6_keyed_by_prefix_and_mapped_normalised() {
        let p = IpPrefixes::DEFAULT;
        let a = p.key("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = p.key("2001:db8:1:2:ffff::9".parse().unwrap());
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        let c = p.key("2001:db8:1:3::1".parse().unwrap());
        assert_ne!(a, c);
        let m = p.key("::ffff:192.0.2.1".parse().unwrap());
        assert_eq!(m, p.key("192.0.2.1".parse().unwrap()));
        assert_eq!(m.to_string(), "192.0.2.1");
    }

    #[test]
    fn prefixes_are_validated() {
        assert!(IpPrefixes::new(0, 64).is_err());
        assert!(IpPrefixes::new(33, 64).is_err());
        assert!(IpPrefixes::new(32, 0).is_err());
        assert!(IpPrefixes::new(32, 129).is_err());
        let p = IpPrefixes::new(24, 128).unwrap();
        assert_eq!(
            p.key("10.1.2.3".parse().unwrap()).to_string(),
            "10.1.2.0/24"
        );
        assert_eq!(p.key("::1".parse().unwrap()).to_string(), "::1");
    }
}
