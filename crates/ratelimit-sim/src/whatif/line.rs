//! One request as an access log recorded it: what the replay rebuilds a
//! request from.

use std::net::IpAddr;

/// One request of an access log.
///
/// ```
/// use ratelimit_sim::whatif::LogLine;
///
/// let line = LogLine::new(0, "192.0.2.7".parse().unwrap(), ("POST", "/login"), 401, None);
/// assert!(!line.succeeded());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When, in nanoseconds since the Unix epoch (UTC).
    pub time: u64,
    /// The address the logging server saw the request come from (its TCP
    /// peer): the replayed request's peer.
    pub remote: IpAddr,
    /// The method (`GET`).
    pub method: String,
    /// The request target: the path and query (`/search?q=1`).
    pub target: String,
    /// The status the app answered.
    pub status: u16,
    /// The forwarding header the request came with (`X-Forwarded-For`,
    /// or the one `--proxy-header` names), when logged.
    pub forwarded: Option<String>,
    /// Other request headers the log recorded (JSON lines' mapped fields:
    /// `X-API-Key`, `Authorization`...), as `(name, value)`.
    pub headers: Vec<(String, String)>,
}

impl LogLine {
    /// A line of `method` on `target` from `remote` at `time`, answered
    /// `status`, with the forwarding header's value if logged and no
    /// other header.
    pub fn new(
        time: u64,
        remote: IpAddr,
        (method, target): (&str, &str),
        status: u16,
        forwarded: Option<String>,
    ) -> Self {
        Self {
            time,
            remote,
            method: method.to_owned(),
            target: target.to_owned(),
            status,
            forwarded,
            headers: Vec::new(),
        }
    }

    /// Whether the app's answer was a success (2xx) or a redirect (3xx):
    /// a customer served, whom a limit would have refused.
    pub fn succeeded(&self) -> bool {
        (200..400).contains(&self.status)
    }
}

/// A bare `-` (nginx's and Envoy's empty value) or an empty text: none.
pub(crate) fn present(s: &str) -> Option<&str> {
    match s.trim() {
        "" | "-" => None,
        s => Some(s),
    }
}
