//! How the server protects itself (`ServeOptions`): timeouts, body size
//! and connection caps.

use std::time::Duration;

/// How [`serve`](super::serve()) protects itself. The defaults suit a service on the open
/// internet; [`ServeOptions::from_env`] reads the connection caps from the
/// environment.
///
/// ```
/// use tower_ratelimit::serve::ServeOptions;
/// use std::time::Duration;
///
/// let options = ServeOptions {
///     idle_timeout: Duration::from_secs(30),
///     max_connections_per_client: 20,
///     ..ServeOptions::default()
/// };
/// assert_eq!(options.header_read_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a client may take to send an HTTP/1.1 request head,
    /// counted from the connection's start or the end of its previous
    /// response (default 10 s). Then the connection is closed.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight,
    /// counted from its start or the end of its last response (default
    /// 10 s), HTTP/1.1 and HTTP/2 alike. Then it is closed. (An HTTP/1.1
    /// connection is also closed by the header read timeout, whichever
    /// comes first.)
    pub idle_timeout: Duration,
    /// How long a request may take from its head to its response, the
    /// body included (default 10 s). Then it is answered `408`.
    pub request_timeout: Duration,
    /// The largest request body accepted (default 64 KiB); larger: `413`.
    pub max_body_bytes: usize,
    /// Connections served at once (default 10,000; at most [`MAX_CAP`](super::MAX_CAP)).
    /// When all are taken, a new one replaces the one idle longest.
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, an IPv6 /64) may hold at
    /// once (default 100); one more is closed at once.
    pub max_connections_per_client: usize,
    /// HTTP/2 streams (requests) open at once on one connection (default
    /// 100).
    pub max_streams_per_connection: u32,
    /// On shutdown, how long open connections get to finish their
    /// requests (default 10 s).
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_connections: 10_000,
            max_connections_per_client: 100,
            max_streams_per_connection: 100,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}
