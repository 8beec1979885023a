//! Allow and deny lists of a policy table's limits: CIDRs matched on the
//! client IP the limit's key would use, and exact keys.

use crate::key::ip::normalize;
use crate::key::{peer_addr, ClientIp};
use http::request::Parts;
use ipnet::IpNet;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

/// The most entries added at run time to each of the allow and deny lists.
pub const MAX_RUNTIME_ENTRIES: usize = 10_000;

/// Where a limit reads the client IP its lists are matched on: the peer,
/// or the client through the trusted proxies.
#[derive(Clone)]
pub(crate) enum IpSource {
    Peer,
    Client(ClientIp),
}

impl IpSource {
    /// The client's address, if the request has one.
    pub(crate) fn addr(&self, req: &Parts) -> Option<IpAddr> {
        match self {
            Self::Peer => peer_addr(req),
            Self::Client(c) => c.client_addr(req).ok(),
        }
        .map(normalize)
    }
}

/// CIDRs and exact keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccessList {
    nets: Vec<IpNet>,
    keys: HashSet<String>,
}

impl AccessList {
    /// The list of `entries`: a CIDR (`10.0.0.0/8`), an address (its
    /// /32 or /128), or else an exact key as the limit renders it.
    pub(crate) fn parse<'a>(entries: impl IntoIterator<Item = &'a String>) -> Result<Self, String> {
        let mut list = Self::default();
        for e in entries {
            let e = e.trim();
            if e.is_empty() || e.len() > 256 {
                return Err(format!(
                    "bad list entry {e:?}: a CIDR, an address or a key of 1 to 256 characters"
                ));
            }
            if let Ok(net) = e.parse::<IpNet>() {
                list.nets.push(net.trunc());
            } else if let Ok(ip) = e.parse::<IpAddr>() {
                list.nets.push(IpNet::from(normalize(ip)));
            } else if e.contains('/')
                && e.chars()
                    .all(|c| c.is_ascii_hexdigit() || ".:/".contains(c))
            {
                return Err(format!("bad CIDR {e:?} in a list"));
            } else {
                list.keys.insert(e.to_owned());
            }
        }
        Ok(list)
    }

    /// This list and `other`'s entries.
    pub(crate) fn and(mut self, other: &AccessList) -> Self {
        self.nets.extend(other.nets.iter().copied());
        self.keys.extend(other.keys.iter().cloned());
        self
    }

    /// Whether it has no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.keys.is_empty()
    }

    /// Whether `ip` is in one of its networks.
    pub(crate) fn has_ip(&self, ip: Option<IpAddr>) -> bool {
        ip.is_some_and(|ip| self.nets.iter().any(|n| n.contains(&ip)))
    }

    /// Whether it has the key rendered `key`.
    pub(crate) fn has_key(&self, key: &str) -> bool {
        !self.keys.is_empty() && self.keys.contains(key)
    }
}

/// One entry added at run time, until `until` (ns of the layers' clock).
struct Timed {
    text: String,
    list: AccessList,
    until: u64,
}

/// The entries added at run time to a table's allow and deny lists (on
/// every limit), each with a time to live. Read by every request of a
/// limit with lists only while one is set (a flag, else nothing).
#[derive(Default)]
pub(crate) struct RuntimeLists {
    any: AtomicBool,
    allow: RwLock<Vec<Timed>>,
    deny: RwLock<Vec<Timed>>,
}

/// Which run-time list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Never limited.
    Allow,
    /// Refused with 403.
    Deny,
}

impl RuntimeLists {
    /// Whether an entry was ever added.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    fn list(&self, kind: ListKind) -> &RwLock<Vec<Timed>> {
        match kind {
            ListKind::Allow => &self.allow,
            ListKind::Deny => &self.deny,
        }
    }

    /// Adds (or renews) `entry` to `kind` until `until`.
    pub(crate) fn add(
        &self,
        kind: ListKind,
        entry: &str,
        until: u64,
        now: u64,
    ) -> Result<(), String> {
        let list = AccessList::parse(std::iter::once(&entry.to_owned()))?;
        let mut entries = self
            .list(kind)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| e.until > now && e.text != entry);
        if entries.len() >= MAX_RUNTIME_ENTRIES {
            return Err(format!(
                "at most {MAX_RUNTIME_ENTRIES} entries added at run time"
            ));
        }
        entries.push(Timed {
            text: entry.to_owned(),
            list,
            until,
        });
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes `entry` from `kind`; whether it was there.
    pub(crate) fn remove(&self, kind: ListKind, entry: &str) -> bool {
        let mut entries = self
            .list(kind)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let before = entries.len();
        entries.retain(|e| e.text != entry);
        before != entries.len()
    }

    /// Whether `kind` has an entry standing at `now` for `ip` or `key`
    /// (`key` rendered on demand).
    pub(crate) fn has(
        &self,
        kind: ListKind,
        ip: Option<IpAddr>,
        key: &dyn Fn() -> Option<String>,
        now: u64,
    ) -> bool {
        let entries = self
            .list(kind)
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if entries.is_empty() {
            return false;
        }
        let live = || entries.iter().filter(|e| e.until > now);
        if live().any(|e| e.list.has_ip(ip)) {
            return true;
        }
        let Some(key) = key() else { return false };
        live().any(|e| e.list.has_key(&key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_addresses_and_keys() {
        let entries: Vec<String> = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7", "vip-key"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let list = AccessList::parse(&entries).unwrap();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert!(list.has_ip(ip("10.200.3.4")));
        assert!(list.has_ip(ip("::ffff:10.1.1.1").map(normalize)));
        assert!(list.has_ip(ip("2001:db8:1::1")));
        assert!(list.has_ip(ip("192.0.2.7")));
        assert!(!list.has_ip(ip("192.0.2.8")));
        assert!(!list.has_ip(None));
        assert!(list.has_key("vip-key"));
        assert!(!list.has_key("10.0.0.1"));
        assert!(AccessList::parse(&["10.0.0.0/33".to_string()]).is_err());
        assert!(AccessList::parse(&[String::new()]).is_err());
    }
}
