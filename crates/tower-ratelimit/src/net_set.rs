//! Networks kept by prefix length, so that finding the ones holding an
//! address costs one hash lookup per prefix length in use (at most 33 for
//! IPv4 and 129 for IPv6), whatever the number of networks.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::collections::HashMap;
use std::net::IpAddr;

/// Networks (stored truncated to their prefix) each with a value.
#[derive(Debug, Clone)]
pub(crate) struct NetMap<V> {
    v4: HashMap<u8, HashMap<Ipv4Net, V>>,
    v6: HashMap<u8, HashMap<Ipv6Net, V>>,
}

impl<V> Default for NetMap<V> {
    fn default() -> Self {
        Self {
            v4: HashMap::new(),
            v6: HashMap::new(),
        }
    }
}

impl<V> NetMap<V> {
    /// Whether it has no network.
    pub(crate) fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Sets `net`'s value, returning the one it replaces.
    pub(crate) fn insert(&mut self, net: IpNet, value: V) -> Option<V> {
        match net.trunc() {
            IpNet::V4(n) => self.v4.entry(n.prefix_len()).or_default().insert(n, value),
            IpNet::V6(n) => self.v6.entry(n.prefix_len()).or_default().insert(n, value),
        }
    }

    /// Whether it has exactly `net`.
    pub(crate) fn contains(&self, net: IpNet) -> bool {
        match net.trunc() {
            IpNet::V4(n) => self
                .v4
                .get(&n.prefix_len())
                .is_some_and(|m| m.contains_key(&n)),
            IpNet::V6(n) => self
                .v6
                .get(&n.prefix_len())
                .is_some_and(|m| m.contains_key(&n)),
        }
    }

    /// Removes `net`, returning its value.
    pub(crate) fn remove(&mut self, net: IpNet) -> Option<V> {
        match net.trunc() {
            IpNet::V4(n) => take(&mut self.v4, n.prefix_len(), &n),
            IpNet::V6(n) => take(&mut self.v6, n.prefix_len(), &n),
        }
    }

    /// Keeps only the networks whose value passes `keep`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.v4.retain(|_, m| {
            m.retain(|_, v| keep(v));
            !m.is_empty()
        });
        self.v6.retain(|_, m| {
            m.retain(|_, v| keep(v));
            !m.is_empty()
        });
    }

    /// Whether a network holding `ip` has a value passing `pred`.
    pub(crate) fn any_holding(&self, ip: IpAddr, pred: impl Fn(&V) -> bool) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.iter().any(|(len, m)| {
                Ipv4Net::new(a, *len).is_ok_and(|n| m.get(&n.trunc()).is_some_and(&pred))
            }),
            IpAddr::V6(a) => self.v6.iter().any(|(len, m)| {
                Ipv6Net::new(a, *len).is_ok_and(|n| m.get(&n.trunc()).is_some_and(&pred))
            }),
        }
    }

    /// Every network with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (IpNet, &V)> {
        let v4 = self.v4.values().flatten().map(|(n, v)| (IpNet::V4(*n), v));
        let v6 = self.v6.values().flatten().map(|(n, v)| (IpNet::V6(*n), v));
        v4.chain(v6)
    }
}

/// Removes `net` from the map of its prefix length `len`, dropping that
/// map once empty.
fn take<N: std::hash::Hash + Eq, V>(
    by_len: &mut HashMap<u8, HashMap<N, V>>,
    len: u8,
    net: &N,
) -> Option<V> {
    let m = by_len.get_mut(&len)?;
    let v = m.remove(net);
    if m.is_empty() {
        by_len.remove(&len);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn finds_the_holding_network_among_many() {
        let mut m = NetMap::default();
        for i in 0..=255u32 {
            for j in 0..=255u32 {
                let net: IpNet = format!("10.{i}.{j}.0/24").parse().unwrap();
                m.insert(net, i * 256 + j);
            }
        }
        m.insert("2001:db8::/32".parse().unwrap(), 70_000);
        m.insert("2001:db8:1:2::/64".parse().unwrap(), 80_000);
        assert_eq!(m.v4.len(), 1);
        assert!(m.any_holding(ip("10.3.4.200"), |v| *v == 3 * 256 + 4));
        assert!(!m.any_holding(ip("10.3.4.200"), |v| *v == 3 * 256 + 5));
        assert!(!m.any_holding(ip("11.3.4.200"), |_| true));
        assert!(m.any_holding(ip("2001:db8:1:2::9"), |v| *v == 80_000));
        assert!(m.any_holding(ip("2001:db8:1:2::9"), |v| *v == 70_000));
        assert!(!m.any_holding(ip("2001:db9::1"), |_| true));
        assert_eq!(m.remove("10.3.4.0/24".parse().unwrap()), Some(3 * 256 + 4));
        assert!(!m.any_holding(ip("10.3.4.200"), |_| true));
        m.retain(|v| *v == 70_000);
        assert_eq!(m.iter().count(), 1);
        assert!(m.any_holding(ip("2001:db8:ffff::1"), |_| true));
        assert!(!m.any_holding(ip("2001:db8:1:2::9"), |v| *v == 80_000));
    }

    #[test]
    fn a_network_is_stored_truncated() {
        let mut m = NetMap::default();
        m.insert("192.0.2.77/24".parse().unwrap(), ());
        assert!(m.any_holding(ip("192.0.2.1"), |_| true));
        assert!(m.remove("192.0.2.0/24".parse().unwrap()).is_some());
        assert!(m.is_empty());
    }
}
