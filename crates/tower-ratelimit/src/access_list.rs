//! Allow and deny lists of a policy table's limits: CIDRs matched on the
//! client IP the limit's key would use, and exact keys.

use crate::key::ip::normalize;
use crate::key::{peer_addr, ClientIp};
use crate::net_set::NetMap;
use http::request::Parts;
use ipnet::IpNet;
use ratelimit_core::plumbing::EntryDigest;
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
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

/// CIDRs and exact keys, each matched in time independent of their number.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccessList {
    nets: NetMap<()>,
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
                // Not shown: it may be a secret key (and is long).
                return Err(format!(
                    "bad list entry of {} bytes: a CIDR, an address or a key of 1 to 256 characters",
                    e.len()
                ));
            }
            if let Ok(net) = e.parse::<IpNet>() {
                list.nets.insert(net, ());
            } else if let Ok(ip) = e.parse::<IpAddr>() {
                list.nets.insert(IpNet::from(normalize(ip)), ());
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

    /// `entry` as one form writes it (a network as `10.0.0.0/8`, an
    /// address as its /32 or /128, a key as itself), or why it is no entry.
    pub(crate) fn canonical(entry: &str) -> Result<String, String> {
        let list = Self::parse(std::iter::once(&entry.trim().to_owned()))?;
        let net = list.nets.iter().next().map(|(net, ())| net.to_string());
        Ok(net.unwrap_or_else(|| entry.trim().to_owned()))
    }

    /// This list and `other`'s entries.
    pub(crate) fn and(mut self, other: &AccessList) -> Self {
        for (net, ()) in other.nets.iter() {
            self.nets.insert(net, ());
        }
        self.keys.extend(other.keys.iter().cloned());
        self
    }

    /// Whether `entry` (as [`canonical`](Self::canonical) writes it) is
    /// a key, not a network: what a shared list holds as its digest.
    pub(crate) fn is_key(entry: &str) -> bool {
        Self::parse(std::iter::once(&entry.to_owned())).is_ok_and(|l| !l.keys.is_empty())
    }

    /// Its networks, and how many keys (never shown: one may be an API
    /// key), for a log line; `none` when empty.
    #[cfg(feature = "redis")]
    pub(crate) fn summary(&self) -> String {
        let mut parts: Vec<String> = self.nets.iter().map(|(net, ())| net.to_string()).collect();
        if !self.keys.is_empty() {
            parts.push(format!("keys not shown: {}", self.keys.len()));
        }
        if parts.is_empty() {
            return "none".to_owned();
        }
        parts.join(", ")
    }

    /// Whether it has no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.keys.is_empty()
    }

    /// Whether `ip` is in one of its networks.
    pub(crate) fn has_ip(&self, ip: Option<IpAddr>) -> bool {
        ip.is_some_and(|ip| self.nets.any_holding(ip, |()| true))
    }

    /// Whether it has the key rendered `key`.
    pub(crate) fn has_key(&self, key: &str) -> bool {
        !self.keys.is_empty() && self.keys.contains(key)
    }
}

/// A request's rendered key, and its digest once computed: at most once
/// per request, and only when an entry is a digest.
pub(crate) struct KeyProbe<'a> {
    text: &'a str,
    digest: OnceCell<String>,
}

impl<'a> KeyProbe<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            digest: OnceCell::new(),
        }
    }

    /// The key's text.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// The key's digest by `with`.
    pub(crate) fn digest(&self, with: &EntryDigest) -> &str {
        self.digest.get_or_init(|| with.of(self.text))
    }
}

/// The entries of one run-time list, each with the time (ns of the
/// layers' clock) it stands until: networks, keys, and the digests of
/// keys shared by another instance (with the digest that made them).
#[derive(Default)]
struct Timed {
    nets: NetMap<u64>,
    keys: HashMap<String, u64>,
    digests: HashMap<String, u64>,
    digest: Option<EntryDigest>,
}

impl Timed {
    fn len(&self) -> usize {
        self.nets.iter().count() + self.keys.len() + self.digests.len()
    }

    fn drop_expired(&mut self, now: u64) {
        self.nets.retain(|until| *until > now);
        self.keys.retain(|_, until| *until > now);
        self.digests.retain(|_, until| *until > now);
    }

    /// Whether `key` is one of its keys, or its digest one of its
    /// digests, standing at `now`.
    fn has_key(&self, key: &KeyProbe<'_>, now: u64) -> bool {
        let live = |until: &u64| *until > now;
        if !self.keys.is_empty() && self.keys.get(key.text()).is_some_and(live) {
            return true;
        }
        match &self.digest {
            Some(d) if !self.digests.is_empty() => {
                self.digests.get(key.digest(d)).is_some_and(live)
            }
            _ => false,
        }
    }
}

/// The entries added at run time to a table's allow and deny lists (on
/// every limit), each with a time to live. Read by every request of a
/// limit with lists only while one is set (a flag, else nothing); a
/// lookup costs one hash lookup per prefix length in use plus one for
/// the key, whatever the number of entries.
#[derive(Default)]
pub(crate) struct RuntimeLists {
    any: AtomicBool,
    allow: RwLock<Timed>,
    deny: RwLock<Timed>,
}

/// Which run-time list.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_ratelimit::policy::{ListKind, PolicyOptions, PolicyTable};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let text = "[[limit]]\nname = \"api\"\nalgorithm = \"gcra 100/1m\"\nkey = \"peer-ip\"\nroutes = [\"GET /\"]\n";
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let app: Router = Router::new().route("/", get(|| async { "hello" }));
/// let (_app, limits) = table.apply_in_memory(app, &PolicyOptions::default(), None).unwrap();
/// let removed = limits.remove_from_list(ListKind::Deny, "198.51.100.0/24").await.unwrap();
/// assert!(!removed); // none was added
/// # }
/// ```
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

    fn list(&self, kind: ListKind) -> &RwLock<Timed> {
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
        let parsed = AccessList::parse(std::iter::once(&entry.to_owned()))?;
        let mut entries = self
            .list(kind)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        entries.drop_expired(now);
        let renewal = parsed.nets.iter().any(|(n, _)| entries.nets.contains(n))
            || parsed.keys.iter().any(|k| entries.keys.contains_key(k));
        if !renewal && entries.len() >= MAX_RUNTIME_ENTRIES {
            return Err(format!(
                "at most {MAX_RUNTIME_ENTRIES} entries added at run time"
            ));
        }
        for (net, ()) in parsed.nets.iter() {
            entries.nets.insert(net, until);
        }
        for key in parsed.keys {
            entries.keys.insert(key, until);
        }
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Replaces `kind`'s entries with `entries` (each with the time it
    /// stands until), the first [`MAX_RUNTIME_ENTRIES`] of them; entries
    /// that do not parse are skipped, and keys in a digest's form are
    /// digests by `digest`. What a shared copy of the lists hands over.
    pub(crate) fn replace<'a>(
        &self,
        kind: ListKind,
        entries: impl IntoIterator<Item = (&'a str, u64)>,
        digest: &EntryDigest,
    ) {
        let mut fresh = Timed {
            digest: Some(digest.clone()),
            ..Timed::default()
        };
        for (entry, until) in entries.into_iter().take(MAX_RUNTIME_ENTRIES) {
            let Ok(parsed) = AccessList::parse(std::iter::once(&entry.trim().to_owned())) else {
                continue;
            };
            for (net, ()) in parsed.nets.iter() {
                fresh.nets.insert(net, until);
            }
            for key in parsed.keys {
                if EntryDigest::is_digest(&key) {
                    fresh.digests.insert(key, until);
                } else {
                    fresh.keys.insert(key, until);
                }
            }
        }
        let any = fresh.len() > 0;
        *self
            .list(kind)
            .write()
            .unwrap_or_else(PoisonError::into_inner) = fresh;
        if any {
            self.any.store(true, Ordering::Release);
        }
    }

    /// Removes `entry` from `kind`; whether it was there.
    pub(crate) fn remove(&self, kind: ListKind, entry: &str) -> bool {
        let Ok(parsed) = AccessList::parse(std::iter::once(&entry.to_owned())) else {
            return false;
        };
        let mut entries = self
            .list(kind)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut found = false;
        for (net, ()) in parsed.nets.iter() {
            found |= entries.nets.remove(net).is_some();
        }
        for key in &parsed.keys {
            found |= entries.keys.remove(key).is_some();
            if let Some(hash) = entries.digest.as_ref().map(|d| d.of(key)) {
                found |= entries.digests.remove(&hash).is_some();
            }
        }
        found
    }

    /// Whether `kind` has an entry standing at `now` for `ip` or `key`
    /// (its digest computed only if an entry is one).
    pub(crate) fn has(
        &self,
        kind: ListKind,
        ip: Option<IpAddr>,
        key: Option<&KeyProbe<'_>>,
        now: u64,
    ) -> bool {
        let entries = self
            .list(kind)
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let live = |until: &u64| *until > now;
        if ip.is_some_and(|ip| entries.nets.any_holding(ip, live)) {
            return true;
        }
        key.is_some_and(|key| entries.has_key(key, now))
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

    #[test]
    fn runtime_lists_with_many_entries() {
        let lists = RuntimeLists::default();
        for i in 0..MAX_RUNTIME_ENTRIES {
            let entry = if i % 2 == 0 {
                format!("10.{}.{}.0/24", i / 256, i % 256)
            } else {
                format!("key-{i}")
            };
            lists.add(ListKind::Deny, &entry, 100, 0).unwrap();
        }
        assert!(lists.add(ListKind::Deny, "192.0.2.1", 100, 0).is_err());
        assert!(lists.add(ListKind::Deny, "key-1", 200, 0).is_ok());
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert!(lists.has(ListKind::Deny, ip("10.0.2.9"), None, 50));
        assert!(!lists.has(ListKind::Deny, ip("10.0.1.9"), None, 50));
        assert!(!lists.has(ListKind::Deny, ip("10.0.2.9"), None, 100));
        assert!(!lists.has(ListKind::Allow, ip("10.0.2.9"), None, 50));
        let key = KeyProbe::new("key-1");
        assert!(lists.has(ListKind::Deny, None, Some(&key), 150));
        assert!(lists.remove(ListKind::Deny, "key-1"));
        assert!(!lists.has(ListKind::Deny, None, Some(&key), 50));
        assert!(lists.remove(ListKind::Deny, "10.0.2.0/24"));
        assert!(!lists.has(ListKind::Deny, ip("10.0.2.9"), None, 50));
        assert!(lists.add(ListKind::Deny, "192.0.2.1", 300, 150).is_ok());
        assert!(lists.has(ListKind::Deny, ip("192.0.2.1"), None, 200));
    }

    /// A digest that counts its uses.
    fn counting() -> (EntryDigest, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let uses = std::sync::Arc::new(AtomicUsize::new(0));
        let u = std::sync::Arc::clone(&uses);
        let digest = EntryDigest::new(move |t: &str| {
            u.fetch_add(1, Ordering::Relaxed);
            ratelimit_core::algorithm::stable_hash(t).into()
        });
        (digest, uses)
    }

    #[test]
    fn shared_key_entries_match_by_their_digest_hashing_the_key_once() {
        use std::sync::atomic::Ordering;
        let (digest, uses) = counting();
        let lists = RuntimeLists::default();
        let shared = digest.of("sk-live-vip");
        let entries = [(shared.as_str(), 100), ("10.0.0.0/8", 100)];
        lists.replace(ListKind::Allow, entries, &digest);
        lists.replace(
            ListKind::Deny,
            [(digest.of("sk-bad").as_str(), 100)],
            &digest,
        );
        uses.store(0, Ordering::Relaxed);
        let key = KeyProbe::new("sk-live-vip");
        assert!(!lists.has(ListKind::Deny, None, Some(&key), 50));
        assert!(lists.has(ListKind::Allow, None, Some(&key), 50));
        assert_eq!(uses.load(Ordering::Relaxed), 1, "one digest per request");
        assert!(!lists.has(ListKind::Allow, None, Some(&key), 100));
        let other = KeyProbe::new("sk-live-other");
        assert!(!lists.has(ListKind::Allow, None, Some(&other), 50));
        // No digest entry: no digest computed.
        lists.replace(ListKind::Allow, [("10.0.0.0/8", 100)], &digest);
        lists.replace(ListKind::Deny, [], &digest);
        uses.store(0, Ordering::Relaxed);
        let ip = "10.1.2.3".parse().ok();
        assert!(lists.has(ListKind::Allow, ip, Some(&KeyProbe::new("sk")), 50));
        assert!(!lists.has(ListKind::Deny, None, Some(&KeyProbe::new("sk")), 50));
        assert_eq!(uses.load(Ordering::Relaxed), 0);
        // Removed by its text, through its digest.
        lists.replace(ListKind::Deny, [(shared.as_str(), 100)], &digest);
        assert!(lists.remove(ListKind::Deny, "sk-live-vip"));
        assert!(!lists.has(
            ListKind::Deny,
            None,
            Some(&KeyProbe::new("sk-live-vip")),
            50
        ));
    }
}
