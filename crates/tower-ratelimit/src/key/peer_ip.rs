//! The peer's IP address, from the connection info.

use super::ip::{IpKey, IpPrefixes};
use super::{KeyError, KeyExtractor};
use crate::LayerBuildError;
use http::request::Parts;
use std::net::{IpAddr, SocketAddr};

/// The address of the connection's peer, as a request extension, for
/// servers without axum's `ConnectInfo` (plain hyper: insert it per
/// connection).
///
/// ```
/// use std::net::SocketAddr;
/// use tower_ratelimit::key::{peer_addr, PeerAddr};
///
/// let peer: SocketAddr = "203.0.113.7:50000".parse().unwrap();
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(PeerAddr(peer)); // once per connection, in plain hyper
/// let (parts, ()) = req.into_parts();
/// assert_eq!(peer_addr(&parts), Some(peer.ip()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The peer's address, read from the request extensions: axum's
/// `ConnectInfo<SocketAddr>` (with the `axum` feature; serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`) or
/// `MockConnectInfo<SocketAddr>` (tests), tonic's `TcpConnectInfo` (with
/// the `grpc` feature; tonic's `Server` inserts it on plain TCP, not
/// behind its TLS: there insert a [`PeerAddr`]), [`PeerAddr`], a
/// `SocketAddr` or an `IpAddr`.
#[inline]
pub fn peer_addr(req: &Parts) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = req
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = req
        .extensions
        .get::<axum::extract::connect_info::MockConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    #[cfg(feature = "grpc")]
    if let Some(addr) = req
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
    {
        return Some(addr.ip());
    }
    if let Some(p) = req.extensions.get::<PeerAddr>() {
        return Some(p.0.ip());
    }
    if let Some(a) = req.extensions.get::<SocketAddr>() {
        return Some(a.ip());
    }
    req.extensions.get::<IpAddr>().copied()
}

/// No peer address: a server set up without connection info, not a bad
/// request. The layer logs it once, at `error` (see
/// `observe::no_peer_once`), and the 400 names the fix.
#[cfg(feature = "axum")]
pub(crate) const NO_PEER: KeyError = KeyError::missing(
    "ConnectInfo<SocketAddr>: serve the app with into_make_service_with_connect_info::<SocketAddr>()",
);
/// Without the `axum` feature the fix may be the feature itself.
#[cfg(not(feature = "axum"))]
pub(crate) const NO_PEER: KeyError = KeyError::missing(
    "ConnectInfo<SocketAddr>: serve the app with into_make_service_with_connect_info::<SocketAddr>() \
     and switch on tower-ratelimit's axum feature, or insert a PeerAddr per connection",
);

/// Whether `e` says the request carries no peer address.
pub(crate) fn is_no_peer(e: &KeyError) -> bool {
    e.is_missing() && e.what() == NO_PEER.what()
}

/// Keys by the IP address of the TCP peer, ignoring every header.
///
/// Right when clients connect directly; behind a proxy every client would
/// share the proxy's address: use [`ClientIp`](super::ClientIp) there.
/// Without connection info it fails with a 400 whose body names the fix
/// (a misconfiguration: the layer also logs it once, at `error`).
///
/// ```
/// use tower_ratelimit::key::{KeyExtractor, PeerAddr, PeerIp};
///
/// let mut req = http::Request::new(()).into_parts().0;
/// req.extensions.insert(PeerAddr("[2001:db8::1]:443".parse().unwrap()));
/// assert_eq!(PeerIp::new().extract(&req).unwrap().to_string(), "2001:db8::/64");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerIp {
    prefixes: IpPrefixes,
}

impl PeerIp {
    /// IPv4 addresses, IPv6 /64 prefixes.
    pub const fn new() -> Self {
        Self {
            prefixes: IpPrefixes::DEFAULT,
        }
    }

    /// How much of an address forms the key (see [`IpPrefixes`]).
    pub const fn prefixes(self, prefixes: IpPrefixes) -> Self {
        Self { prefixes }
    }

    /// Keys IPv6 addresses by a prefix of `prefix` bits (1..=128).
    pub fn ipv6_prefix(self, prefix: u8) -> Result<Self, LayerBuildError> {
        IpPrefixes::new(self.prefixes.v4(), prefix).map(|prefixes| Self { prefixes })
    }

    /// Keys IPv4 addresses by a prefix of `prefix` bits (1..=32).
    pub fn ipv4_prefix(self, prefix: u8) -> Result<Self, LayerBuildError> {
        IpPrefixes::new(prefix, self.prefixes.v6()).map(|prefixes| Self { prefixes })
    }
}

impl KeyExtractor for PeerIp {
    type Key = IpKey;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<IpKey, KeyError> {
        match peer_addr(req) {
            Some(ip) => Ok(self.prefixes.key(ip)),
            None => Err(NO_PEER),
        }
    }
}
