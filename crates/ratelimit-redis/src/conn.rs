//! One shared multiplexed connection, (re)established in the background.

use crate::failure::{Failure, Kind};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, Value};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// Where the store connects.
pub(crate) enum Backend {
    /// One server (or a proxy).
    Single(Client),
    /// A Redis Cluster: each check goes to the node owning its key's slot.
    #[cfg(feature = "cluster")]
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// A connection handle: cheap to clone, pipelined underneath.
#[derive(Clone)]
pub(crate) enum Handle {
    Single(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for Handle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.get_db(),
        }
    }
}

#[derive(Default)]
struct Slot {
    conn: Option<(Handle, u64)>,
    connecting: bool,
    generation: u64,
    last_error: Option<Failure>,
}

/// The connection of a store. Every call clones the multiplexed connection
/// (a handle to one pipelined socket). When it breaks, the next call starts
/// a reconnect in a background task, so a caller's timeout never cuts a
/// connect short.
pub(crate) struct Conn {
    backend: Backend,
    config: AsyncConnectionConfig,
    scripts: Vec<redis::Script>,
    slot: Mutex<Slot>,
    ready: Notify,
}

impl Conn {
    pub(crate) fn new(
        backend: Backend,
        connect_timeout: Duration,
        scripts: Vec<redis::Script>,
    ) -> Self {
        Self {
            backend,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                // The store applies its own, shorter, per-call timeout.
                .set_response_timeout(None),
            scripts,
            slot: Mutex::new(Slot::default()),
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection and its generation, waiting for a connect if needed.
    pub(crate) async fn get(self: &Arc<Self>) -> Result<(Handle, u64), Failure> {
        let mut notified = pin!(self.ready.notified());
        {
            let mut slot = self.lock();
            if let Some((c, g)) = &slot.conn {
                return Ok((c.clone(), *g));
            }
            notified.as_mut().enable();
            if !slot.connecting {
                slot.connecting = true;
                tokio::spawn(Arc::clone(self).connect());
            }
        }
        notified.await;
        let slot = self.lock();
        match &slot.conn {
            Some((c, g)) => Ok((c.clone(), *g)),
            None => Err(slot
                .last_error
                .clone()
                .unwrap_or_else(|| Failure::new(Kind::Io, "not connected"))),
        }
    }

    async fn connect(self: Arc<Self>) {
        let result = match &self.backend {
            Backend::Single(client) => client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
                .map(Handle::Single),
            #[cfg(feature = "cluster")]
            Backend::Cluster(client) => client.get_async_connection().await.map(Handle::Cluster),
        };
        let result = match result {
            Ok(mut c) => {
                // Load the scripts now, so the first check is one round
                // trip (EVALSHA still reloads on NOSCRIPT, e.g. after a
                // SCRIPT FLUSH or a failover).
                for s in &self.scripts {
                    let _ = s.prepare_invoke().load_async(&mut c).await;
                }
                Ok(c)
            }
            Err(e) => Err(e),
        };
        {
            let mut slot = self.lock();
            slot.connecting = false;
            match result {
                Ok(c) => {
                    slot.generation += 1;
                    slot.conn = Some((c, slot.generation));
                    slot.last_error = None;
                    tracing::debug!(target: "ratelimit_redis", "connected to redis");
                }
                Err(e) => {
                    tracing::debug!(target: "ratelimit_redis", error = %e, "cannot connect to redis");
                    slot.last_error = Some(Failure::redis(&e));
                }
            }
        }
        self.ready.notify_waiters();
    }

    /// Drops connection `generation` (broken), unless already replaced.
    pub(crate) fn invalidate(&self, generation: u64) {
        let mut slot = self.lock();
        if matches!(slot.conn, Some((_, g)) if g == generation) {
            slot.conn = None;
        }
    }

    /// Drops the current connection, whatever it is.
    pub(crate) fn reset(&self) {
        self.lock().conn = None;
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}
