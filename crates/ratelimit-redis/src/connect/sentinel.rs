//! A Sentinel-monitored master: connected to where the Sentinels name it,
//! and watched, so that a failover whose old master is still up (a
//! `SENTINEL FAILOVER`, a partition) moves the store within a second.
//!
//! A leaf: the connection that follows the Sentinels is a [`Follower`],
//! so this file does not name it.

use redis::aio::MultiplexedConnection;
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, RedisResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// How often the watch asks the Sentinels which master is current.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// A host and port.
type Addr = (String, u16);

/// A connection following a [`SentinelBackend`]: what the watch needs of it.
pub(crate) trait Follower: Send + Sync + 'static {
    /// The Sentinels it follows, if that is its backend.
    fn sentinel(&self) -> Option<&SentinelBackend>;
    /// Connects afresh in the background (the current connection serving
    /// until then).
    fn refresh(self: &Arc<Self>);
}

/// The Sentinels of one service, and the master last connected to.
pub(crate) struct SentinelBackend {
    client: tokio::sync::Mutex<SentinelClient>,
    sentinels: Vec<Addr>,
    service: String,
    /// The master the current connection goes to.
    current: Mutex<Option<Addr>>,
    watching: AtomicBool,
}

impl SentinelBackend {
    pub(crate) fn new(client: SentinelClient, sentinels: Vec<Addr>, service: String) -> Self {
        Self {
            client: tokio::sync::Mutex::new(client),
            sentinels,
            service,
            current: Mutex::new(None),
            watching: AtomicBool::new(false),
        }
    }

    /// A connection to the master the Sentinels name now.
    pub(crate) async fn open(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        let master = self.client.lock().await.async_get_client().await?;
        let addr = match master.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(h, p) => Some((h.clone(), *p)),
            _ => None,
        };
        let c = master
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = addr;
        Ok(c)
    }

    /// A pub/sub connection to the master the Sentinels name now.
    pub(crate) async fn pubsub(&self) -> RedisResult<redis::aio::PubSub> {
        let master = self.client.lock().await.async_get_client().await?;
        master.get_async_pubsub().await
    }

    /// Starts watching for `conn` (once): every [`WATCH_EVERY`], the
    /// master the Sentinels name is compared with the one connected to,
    /// and a change reconnects (in the background, the current connection
    /// serving until then). Ends when the store is dropped.
    pub(crate) fn watch<F: Follower>(&self, conn: &Arc<F>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(conn);
        tokio::spawn(watch(weak, self.sentinels.clone(), self.service.clone()));
    }

    fn current(&self) -> Option<Addr> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn watch<F: Follower>(conn: Weak<F>, sentinels: Vec<Addr>, service: String) {
    let mut link: Option<MultiplexedConnection> = None;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(conn) = conn.upgrade() else {
            return;
        };
        let named = tokio::time::timeout(WATCH_EVERY, ask(&mut link, &sentinels, &service))
            .await
            .ok()
            .flatten();
        let Some(sentinel) = conn.sentinel() else {
            return;
        };
        if let (Some(named), Some(current)) = (named, sentinel.current()) {
            if named != current {
                tracing::info!(
                    target: "ratelimit_redis",
                    service,
                    master = %format!("{}:{}", named.0, named.1),
                    "the sentinels name another master: reconnecting"
                );
                conn.refresh();
            }
        }
    }
}

/// The master the first Sentinel that answers names for `service`.
async fn ask(
    link: &mut Option<MultiplexedConnection>,
    sentinels: &[Addr],
    service: &str,
) -> Option<Addr> {
    for (host, port) in sentinels {
        if link.is_none() {
            let client =
                redis::Client::open(redis::ConnectionAddr::Tcp(host.clone(), *port)).ok()?;
            *link = client.get_multiplexed_async_connection().await.ok();
        }
        let Some(c) = link.as_mut() else { continue };
        let named: RedisResult<Addr> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(service)
            .query_async(c)
            .await;
        match named {
            Ok(addr) => return Some(addr),
            Err(_) => *link = None,
        }
    }
    None
}
