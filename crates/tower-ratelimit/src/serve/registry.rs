//! The open connections: how many each client holds (capped), and which
//! have been idle longest (shed first when the server runs short).

use super::activity::Activity;
use crate::key::{IpKey, IpPrefixes};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::Instant;

/// Every open connection, and the count per client: an IPv4 address or an
/// IPv6 /64 (one host cannot escape the cap by rotating addresses in its
/// /64). Its memory is bounded by the connection cap: a client is
/// forgotten when its last connection closes.
///
/// The request path never takes its lock: only accepting and closing a
/// connection do, and shedding scans it, which happens only when the
/// server is full or out of file descriptors.
#[derive(Debug)]
pub(crate) struct Registry {
    per_client: usize,
    base: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    conns: HashMap<u64, Arc<Activity>>,
    clients: HashMap<IpKey, usize>,
}

impl Registry {
    /// At most `per_client` connections per client; idle times count from
    /// `base`.
    pub(crate) fn new(per_client: usize, base: Instant) -> Arc<Self> {
        Arc::new(Self {
            per_client: per_client.max(1),
            base,
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding it; a poisoned lock still holds
        // consistent counts.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a connection from `peer`, or `None` when its client
    /// already holds its cap.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Entry> {
        let client = IpPrefixes::default().key(peer);
        let mut inner = self.lock();
        let count = inner.clients.entry(client).or_insert(0);
        if *count >= self.per_client {
            return None;
        }
        *count += 1;
        let id = inner.next_id;
        inner.next_id += 1;
        let activity = Arc::new(Activity::new(self.base));
        inner.conns.insert(id, Arc::clone(&activity));
        Some(Entry {
            registry: Arc::clone(self),
            id,
            client,
            activity,
        })
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.lock().conns.len()
    }

    /// Sheds up to `n` of the connections idle longest (none in flight, not
    /// shed already), but never `spare`: each closes at once. How many were
    /// shed.
    pub(crate) fn shed_oldest_idle(&self, n: usize, spare: Option<&Entry>) -> usize {
        let spare = spare.map(|e| Arc::as_ptr(&e.activity));
        // Idle since the same instant: the one accepted first goes first.
        let mut idle: Vec<((Instant, u64), Arc<Activity>)> = self
            .lock()
            .conns
            .iter()
            .filter(|(_, a)| !a.is_shed() && Some(Arc::as_ptr(a)) != spare)
            .filter_map(|(&id, a)| Some(((a.idle_since()?, id), Arc::clone(a))))
            .collect();
        if idle.len() > n {
            idle.select_nth_unstable_by_key(n, |(order, _)| *order);
            idle.truncate(n);
        }
        idle.iter().filter(|(_, a)| a.shed()).count()
    }
}

/// An open connection in the [`Registry`], removed when dropped.
#[derive(Debug)]
pub(crate) struct Entry {
    registry: Arc<Registry>,
    id: u64,
    client: IpKey,
    /// The connection's activity.
    pub(crate) activity: Arc<Activity>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        inner.conns.remove(&self.id);
        if let Some(count) = inner.clients.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                inner.clients.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_is_an_ipv4_address_or_an_ipv6_64() {
        let registry = Registry::new(2, Instant::now());
        let a = registry.admit(ip("2001:db8:1:2::1")).unwrap();
        let _b = registry.admit(ip("2001:db8:1:2:ffff::9")).unwrap();
        // A third address in the same /64: over the cap.
        assert!(registry.admit(ip("2001:db8:1:2::3")).is_none());
        // Another /64, and IPv4 (mapped or not), each have their own cap.
        assert!(registry.admit(ip("2001:db8:1:3::1")).is_some());
        let _c = registry.admit(ip("192.0.2.1")).unwrap();
        let _d = registry.admit(ip("::ffff:192.0.2.1")).unwrap();
        assert!(registry.admit(ip("192.0.2.1")).is_none());
        assert!(registry.admit(ip("192.0.2.2")).is_some());
        // A closed connection frees its place.
        drop(a);
        assert!(registry.admit(ip("2001:db8:1:2::3")).is_some());
        assert_eq!(registry.len(), 3, "b, c and d");
    }

    #[tokio::test(start_paused = true)]
    async fn sheds_the_connections_idle_longest() {
        let registry = Registry::new(10, Instant::now());
        let mut conns = Vec::new();
        for _ in 0..4 {
            conns.push(registry.admit(ip("192.0.2.1")).unwrap());
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        // The oldest is busy; a request on the second ended just now.
        let _busy = conns[0].activity.begin();
        drop(conns[1].activity.begin());
        assert_eq!(registry.shed_oldest_idle(1, None), 1);
        assert!(conns[2].activity.is_shed());
        // The newcomer is spared: the next oldest goes.
        assert_eq!(registry.shed_oldest_idle(1, Some(&conns[3])), 1);
        assert!(conns[1].activity.is_shed());
        assert_eq!(registry.shed_oldest_idle(5, Some(&conns[3])), 0);
        assert_eq!(registry.shed_oldest_idle(5, None), 1);
        assert!(conns[3].activity.is_shed());
        assert!(!conns[0].activity.is_shed());
        assert_eq!(registry.shed_oldest_idle(5, None), 0, "none idle left");
    }
}
