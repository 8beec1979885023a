//! IP keys: IPv4 addresses and IPv6 prefixes, with IPv4-mapped addresses normalised.

use crate::LayerBuildError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A client's IP address as a key: `Copy`, no allocation.
///
/// ```
/// use tower_ratelimit::key::{IpKey, IpPrefixes};
///
/// let key: IpKey = IpPrefixes::DEFAULT.key("2001:db8::1".parse().unwrap());
/// assert_eq!(key.to_string(), "2001:db8::/64");
/// let mapped = IpPrefixes::DEFAULT.key("::ffff:198.51.100.7".parse().unwrap());
/// assert_eq!(mapped.to_string(), "198.51.100.7");
/// ```
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
///
/// To limit a client's network as well as its address, give a second
/// limit (its own layer or policy entry) a shorter prefix: one /48 holds
/// 65,536 /64s and one /24 holds 256 IPv4 addresses, so an attacker who
/// rotates through them is held to the shorter prefix's limit.
/// [`SITE`](Self::SITE) is /24 and /48.
///
/// Parses from `v4/N`, `v6/N` or both, comma-separated, in any order (the
/// family left out keeps its default), as in a policy file's
/// `client-ip(v4/24, v6/48)`:
///
/// ```
/// use tower_ratelimit::key::IpPrefixes;
///
/// assert_eq!("v4/24, v6/48".parse(), Ok(IpPrefixes::SITE));
/// assert_eq!("v6/56".parse::<IpPrefixes>().unwrap().v4(), 32);
/// assert!("v6/129".parse::<IpPrefixes>().is_err());
/// assert!("48".parse::<IpPrefixes>().is_err()); // which family?
/// ```
///
/// IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are IPv4 addresses and
/// take the IPv4 prefix.
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
    /// IPv4 /32, IPv6 /64: one address, one IPv6 subnet (what one host or
    /// one home network usually holds).
    pub const DEFAULT: Self = Self { v4: 32, v6: 64 };

    /// IPv4 /24, IPv6 /48: a whole site (RFC 6177 assigns an end site a
    /// /48 to /56; a /24 is the smallest IPv4 block routed on the
    /// internet). Shared by many users behind a carrier's NAT: see the
    /// guide's [Limits over address prefixes](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/guide/proxies.md#limits-over-address-prefixes).
    pub const SITE: Self = Self { v4: 24, v6: 48 };

    /// Custom prefix lengths: IPv4 in `1..=32`, IPv6 in `1..=128`.
    pub const fn new(v4: u8, v6: u8) -> Result<Self, LayerBuildError> {
        if v4 == 0 || v4 > 32 {
            return Err(LayerBuildError::BadPrefix {
                family: "IPv4",
                prefix: v4 as u32,
            });
        }
        if v6 == 0 || v6 > 128 {
            return Err(LayerBuildError::BadPrefix {
                family: "IPv6",
                prefix: v6 as u32,
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

impl fmt::Display for IpPrefixes {
    /// `v4/32, v6/64`: the form [`FromStr`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v4/{}, v6/{}", self.v4, self.v6)
    }
}

impl FromStr for IpPrefixes {
    type Err = LayerBuildError;

    /// `v4/N`, `v6/N`, or both joined by a comma; the error names the
    /// rejected text or length.
    fn from_str(s: &str) -> Result<Self, LayerBuildError> {
        let bad = || LayerBuildError::BadPrefixList(s.to_owned());
        let (mut v4, mut v6) = (None, None);
        for part in s.split(',') {
            let (family, length) = part.trim().split_once('/').ok_or_else(bad)?;
            let (slot, name, max) = match family.trim() {
                "v4" => (&mut v4, "IPv4", 32),
                "v6" => (&mut v6, "IPv6", 128),
                _ => return Err(bad()),
            };
            let length = length.trim();
            if slot.is_some() || length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // Digits only: too long to parse is out of range too.
            let n = length.parse::<u32>().unwrap_or(u32::MAX);
            if n == 0 || n > max {
                return Err(LayerBuildError::BadPrefix {
                    family: name,
                    prefix: n,
                });
            }
            *slot = Some(n as u8);
        }
        Self::new(
            v4.unwrap_or(Self::DEFAULT.v4),
            v6.unwrap_or(Self::DEFAULT.v6),
        )
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

    #[test]
    fn prefixes_parse_by_family() {
        for (text, v4, v6) in [
            ("v4/24, v6/48", 24, 48),
            ("v6/48,v4/24", 24, 48),
            (" v6 / 56 ", 32, 56),
            ("v4/16", 16, 64),
            ("v4/32, v6/128", 32, 128),
        ] {
            let p: IpPrefixes = text.parse().unwrap();
            assert_eq!((p.v4(), p.v6()), (v4, v6), "{text}");
            assert_eq!(p.to_string().parse::<IpPrefixes>(), Ok(p));
        }
        for bad in [
            "",
            "48",
            "/48",
            "v6",
            "v6/",
            "v6/4x",
            "v5/8",
            "v6/48, v6/56",
            "v6/48,",
            "v6/-1",
        ] {
            assert_eq!(
                bad.parse::<IpPrefixes>(),
                Err(LayerBuildError::BadPrefixList(bad.to_owned())),
                "{bad:?}"
            );
        }
        for (bad, family, prefix) in [
            ("v4/0", "IPv4", 0),
            ("v4/33", "IPv4", 33),
            ("v6/129", "IPv6", 129),
            ("v6/300", "IPv6", 300),
            ("v6/99999999999", "IPv6", u32::MAX),
        ] {
            assert_eq!(
                bad.parse::<IpPrefixes>(),
                Err(LayerBuildError::BadPrefix { family, prefix }),
                "{bad:?}"
            );
        }
        let e = "v6/129".parse::<IpPrefixes>().unwrap_err().to_string();
        assert_eq!(e, "bad IPv6 prefix /129: expected 1 to 128");
    }

    #[test]
    fn site_prefixes_group_a_network_and_mapped_addresses_are_ipv4() {
        let p = IpPrefixes::SITE;
        let a = p.key("2001:db8:7:1::1".parse().unwrap());
        assert_eq!(a, p.key("2001:db8:7:ffff:1::9".parse().unwrap()));
        assert_eq!(a.to_string(), "2001:db8:7::/48");
        assert_ne!(a, p.key("2001:db8:8::1".parse().unwrap()));
        let m = p.key("::ffff:198.51.100.77".parse().unwrap());
        assert_eq!(m, p.key("198.51.100.1".parse().unwrap()));
        assert_eq!(m.to_string(), "198.51.100.0/24");
    }
}
