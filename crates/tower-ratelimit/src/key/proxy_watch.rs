//! Warnings, each logged once, for proxy settings that are most likely wrong: seen in a client-IP extractor's first requests.
//!
//! The watch looks at the first [`WATCHED`] requests whose peer is not a
//! trusted proxy (while it watches, each writes one counter; after, a check
//! reads one flag):
//!
//! - a forwarding header from such a peer with no trusted proxy set: the
//!   app is most likely behind a proxy nobody told it about, and every
//!   client shares the proxy's address and its limit;
//! - the same header from an untrusted peer while proxies are set: that
//!   peer may be a proxy missing from the list (or a client forging it);
//! - every one of the first [`ONE_PEER`] requests from one private or
//!   loopback address, with no trusted proxy set: the same mistake
//!   without a forwarding header.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

/// Untrusted-peer requests watched.
pub(crate) const WATCHED: u32 = 1_000;
/// Requests from one private peer that make a warning.
pub(crate) const ONE_PEER: u32 = 100;

/// What the first requests showed (shared by an extractor's clones).
#[derive(Default)]
pub(crate) struct ProxyWatch {
    seen: AtomicU32,
    done: AtomicBool,
    first: OnceLock<IpAddr>,
    mixed: AtomicBool,
    header_warned: AtomicBool,
}

impl std::fmt::Debug for ProxyWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyWatch")
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One request from a peer that is not a trusted proxy.
pub(crate) struct Untrusted<'a> {
    /// The peer.
    pub peer: IpAddr,
    /// Whether the request carries the forwarding header.
    pub header_present: bool,
    /// That header's name, for the warning.
    pub header: &'a str,
    /// Whether no proxy is trusted at all.
    pub none_trusted: bool,
}

impl ProxyWatch {
    /// Whether the watch is over (one relaxed read).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Looks at one request from an untrusted peer.
    #[cold]
    pub(crate) fn untrusted(&self, req: Untrusted<'_>) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= WATCHED {
            self.done.store(true, Ordering::Relaxed);
        }
        if req.header_present && !self.header_warned.swap(true, Ordering::Relaxed) {
            header_warning(&req);
        }
        let first = *self.first.get_or_init(|| req.peer);
        if first != req.peer {
            self.mixed.store(true, Ordering::Relaxed);
        }
        if n == ONE_PEER
            && req.none_trusted
            && !self.mixed.load(Ordering::Relaxed)
            && is_private(first)
        {
            tracing::warn!(
                peer = %first,
                "the first {ONE_PEER} requests all came from one private address and no proxy \
                 is trusted: behind a proxy or load balancer, every client shares its address \
                 and its limits; set the trusted proxies (TRUSTED_PROXIES)"
            );
        }
    }
}

fn header_warning(req: &Untrusted<'_>) {
    if req.none_trusted {
        tracing::warn!(
            peer = %req.peer,
            header = req.header,
            "a request carries a forwarding header but no proxy is trusted, so the header is \
             ignored and the client is the peer: behind a proxy, every client shares its \
             address and its limits; set the trusted proxies (TRUSTED_PROXIES)"
        );
    } else {
        tracing::warn!(
            peer = %req.peer,
            header = req.header,
            "a request carries a forwarding header from a peer that is not a trusted proxy, \
             so the header is ignored: if this peer is one of your proxies, add it to the \
             trusted proxies (TRUSTED_PROXIES); if not, a client is forging the header"
        );
    }
}

/// Loopback, private (RFC 1918, ULA), link-local or shared (RFC 6598).
pub(crate) fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            a.is_loopback() || a.is_private() || a.is_link_local() || {
                let [b0, b1, ..] = a.octets();
                b0 == 100 && (64..128).contains(&b1)
            }
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            a.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.9",
            "100.64.0.1",
            "::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["fd00::1", "fe80::1"] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "100.128.0.1", "2001:db8::1", "172.32.0.1"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_watch_ends() {
        let watch = ProxyWatch::default();
        for _ in 0..WATCHED {
            assert!(!watch.is_done());
            watch.untrusted(Untrusted {
                peer: "8.8.8.8".parse().unwrap(),
                header_present: false,
                header: "x-forwarded-for",
                none_trusted: true,
            });
        }
        assert!(watch.is_done());
    }
}
