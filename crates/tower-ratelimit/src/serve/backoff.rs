//! How the accept loop reacts to errors (`AcceptBackoff`): at once after
//! one connection's trouble, backing off when out of a resource.

use super::throttled::Throttled;
use std::io;
use std::time::Duration;

/// How the accept loop reacts to errors: the connection-level ones
/// (`ECONNABORTED`, `ECONNRESET`...) concern one client, so the next
/// `accept` follows at once; any other (out of file descriptors, of
/// memory...) would recur at once, so it waits, from 10 ms doubling up to
/// 1 s, until an `accept` succeeds. Warnings are logged at most once a
/// second.
///
/// ```
/// use tower_ratelimit::serve::AcceptBackoff;
///
/// let mut backoff = AcceptBackoff::new();
/// let emfile = std::io::Error::from_raw_os_error(24); // out of file descriptors
/// assert_eq!(backoff.failed(&emfile), AcceptBackoff::FIRST);
/// backoff.succeeded();
/// ```
#[derive(Debug)]
pub struct AcceptBackoff {
    delay: Duration,
    log: Throttled,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl AcceptBackoff {
    /// The first wait after a resource error.
    pub const FIRST: Duration = Duration::from_millis(10);
    /// The longest wait.
    pub const MAX: Duration = Duration::from_secs(1);

    /// No errors yet.
    pub fn new() -> Self {
        Self {
            delay: Duration::ZERO,
            log: Throttled::new(),
        }
    }

    /// After a failed `accept`: how long to wait before the next one
    /// (zero for an error that concerns one connection only).
    pub fn failed(&mut self, error: &io::Error) -> Duration {
        if is_connection_error(error) {
            tracing::debug!(%error, "accept failed for one connection");
            return Duration::ZERO;
        }
        self.delay = (self.delay * 2).clamp(Self::FIRST, Self::MAX);
        let delay = self.delay;
        self.log.warn(|skipped| {
            tracing::warn!(%error, ?delay, skipped, "accept failed: backing off");
        });
        delay
    }

    /// After a successful `accept`: the next error starts from
    /// [`FIRST`](Self::FIRST) again.
    pub fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: io::ErrorKind) -> io::Error {
        io::Error::from(kind)
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_on_resource_errors_up_to_a_second() {
        let mut b = AcceptBackoff::new();
        let emfile = io::Error::from_raw_os_error(24); // EMFILE on Linux and macOS
        let waits: Vec<_> = (0..10).map(|_| b.failed(&emfile).as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        // One connection's trouble: no wait, and the backoff stays.
        assert_eq!(
            b.failed(&err(io::ErrorKind::ConnectionAborted)),
            Duration::ZERO
        );
        assert_eq!(
            b.failed(&err(io::ErrorKind::ConnectionReset)),
            Duration::ZERO
        );
        assert_eq!(b.failed(&emfile), AcceptBackoff::MAX);
        b.succeeded();
        assert_eq!(
            b.failed(&err(io::ErrorKind::OutOfMemory)),
            AcceptBackoff::FIRST
        );
    }
}
