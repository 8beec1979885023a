//! The accept loop's gate (`Gate`): the open connections and their
//! slots, the caps, the backoff after accept errors, and their throttled
//! warnings.

use super::backoff::AcceptBackoff;
use super::closed::{closed, CLOSED_CLIENT_CAP, CLOSED_SHED_ACCEPT_ERROR, CLOSED_SHED_FULL};
use super::connection_caps::MAX_CAP;
use super::options::ServeOptions;
use super::registry::{Entry, Registry};
use super::throttled::Throttled;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How many of the connections idle longest an accept error for want of
/// file descriptors (or memory) sheds.
pub const SHED_ON_ACCEPT_ERROR: usize = 16;

/// The accept loop's state: the open connections and their slots, and
/// its decisions on each accepted connection (or error), with their
/// throttled warnings.
pub(super) struct Gate {
    max: usize,
    registry: Arc<Registry>,
    slots: Arc<Semaphore>,
    backoff: AcceptBackoff,
    full: Throttled,
    over_cap: Throttled,
}

impl Gate {
    pub(super) fn new(options: &ServeOptions) -> Self {
        let max = options.max_connections.clamp(1, MAX_CAP);
        Self {
            max,
            registry: Registry::new(options.max_connections_per_client, Instant::now()),
            slots: Arc::new(Semaphore::new(max)),
            backoff: AcceptBackoff::new(),
            full: Throttled::new(),
            over_cap: Throttled::new(),
        }
    }

    /// The connection, or after an error how long to wait before the
    /// next `accept`, having shed idle connections if the error means the
    /// process ran out of file descriptors (or memory).
    pub(super) fn accepted(
        &mut self,
        accepted: io::Result<(TcpStream, SocketAddr)>,
    ) -> Result<(TcpStream, SocketAddr), Duration> {
        match accepted {
            Ok(accepted) => {
                self.backoff.succeeded();
                Ok(accepted)
            }
            Err(e) => {
                let delay = self.backoff.failed(&e);
                if !delay.is_zero() {
                    let shed = self.registry.shed_oldest_idle(SHED_ON_ACCEPT_ERROR, None);
                    closed(CLOSED_SHED_ACCEPT_ERROR, shed);
                    tracing::debug!(shed, "idle connections shed to free file descriptors");
                }
                Err(delay)
            }
        }
    }

    /// Registers a connection from `peer`, or closes it at once (`None`)
    /// when its client holds its cap.
    pub(super) fn admit(&mut self, peer: SocketAddr) -> Option<Entry> {
        let entry = self.registry.admit(peer.ip());
        if entry.is_none() {
            closed(CLOSED_CLIENT_CAP, 1);
            self.over_cap.warn(|skipped| {
                tracing::warn!(
                    client = %peer.ip(),
                    skipped,
                    "connection cap per client reached: new connection closed"
                );
            });
        }
        entry
    }

    /// A slot for `newcomer`: a free one, or when all are taken the one of
    /// the connection idle longest (never the newcomer), shed; if none is
    /// idle, the first to be freed.
    pub(super) async fn slot(&mut self, newcomer: &Entry) -> OwnedSemaphorePermit {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return slot;
        }
        let shed = self.registry.shed_oldest_idle(1, Some(newcomer));
        closed(CLOSED_SHED_FULL, shed);
        let max = self.max;
        self.full.warn(|skipped| {
            if shed == 0 {
                tracing::warn!(
                    max,
                    skipped,
                    "connection limit reached, none idle: waiting for one to close"
                );
            } else {
                tracing::warn!(
                    max,
                    skipped,
                    "connection limit reached: the connection idle longest closed"
                );
            }
        });
        Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// After shutdown: waits at most `grace` for every connection to
    /// close.
    pub(super) async fn drain(self, grace: Duration) {
        tracing::info!(
            open = self.registry.len(),
            ?grace,
            "shutting down: no new connections; open ones may finish"
        );
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        if tokio::time::timeout(grace, self.slots.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("connections still open after the grace period: dropped");
        }
    }
}
