//! One shared multiplexed connection, (re)established in the background.

#[cfg(feature = "sentinel")]
use crate::connect::sentinel::{Follower, SentinelBackend};
use crate::fleet::key_secret::{SecretCell, SecretSource};
use crate::fleet::roster::{Rosters, INSTANCE_ANNOUNCE_EVERY};
use crate::outage::failure::{Failure, Kind};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, Value};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where the store connects.
// One per connection, built once: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    /// One server (or a proxy).
    Single(Client),
    /// A Redis Cluster: each check goes to the node owning its key's slot.
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterBackend>),
    /// The master a Sentinel names, asked again at every connect.
    #[cfg(feature = "sentinel")]
    Sentinel(Box<SentinelBackend>),
}

impl Backend {
    /// A new connection: to the server, to the Cluster, or to the master
    /// the Sentinels name now.
    pub(crate) async fn open(&self, config: &AsyncConnectionConfig) -> redis::RedisResult<Handle> {
        match self {
            Self::Single(client) => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(Handle::Single),
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster
                .target
                .client
                .get_async_connection()
                .await
                .map(Handle::Cluster),
            #[cfg(feature = "sentinel")]
            Self::Sentinel(sentinel) => sentinel.open(config).await.map(Handle::Single),
        }
    }
}

/// A Cluster's client, and which of its nodes a pub/sub subscriber tries
/// next.
#[cfg(feature = "cluster")]
pub(crate) struct ClusterBackend {
    target: crate::connect::cluster_target::ClusterTarget,
    next: std::sync::atomic::AtomicUsize,
}

#[cfg(feature = "cluster")]
impl ClusterBackend {
    pub(crate) fn new(target: crate::connect::cluster_target::ClusterTarget) -> Self {
        Self {
            target,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A subscriber on one node, each call the next in turn (a `PUBLISH`
    /// reaches every node); `None` when it knows no node.
    async fn pubsub(&self) -> Option<redis::RedisResult<redis::aio::PubSub>> {
        let nodes = &self.target.nodes;
        if nodes.is_empty() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % nodes.len();
        Some(nodes[i].get_async_pubsub().await)
    }
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

/// A connection to a `Target`, whatever its topology,
/// for an app's own commands (see `Target::connect`).
#[derive(Clone)]
pub struct Connection(pub(crate) Handle);

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Slot {
    conn: Option<(Handle, u64)>,
    connecting: bool,
    generation: u64,
    last_error: Option<Failure>,
    /// Whether a connect has finished yet (succeeded or failed): until
    /// then, calls wait for the first connection up to the connect timeout.
    tried: bool,
}

/// A script of a store on this connection, and the connection generation
/// it was last loaded on (0: never).
pub(crate) struct ScriptSlot {
    source: String,
    pub(crate) script: redis::Script,
    loaded: AtomicU64,
}

/// The connection of a store. Every call clones the multiplexed connection
/// (a handle to one pipelined socket). Connecting runs in a background
/// task (from the store's build, or when a call finds no connection), so
/// a caller's timeout never cuts a connect short; each connect loads every
/// script of the stores on it, and reads (or writes) the key secret, in
/// the same task, before any check uses the connection.
pub(crate) struct Conn {
    backend: Backend,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    scripts: Mutex<Vec<Arc<ScriptSlot>>>,
    pub(crate) secret: SecretCell,
    slot: Mutex<Slot>,
    ready: Notify,
    /// When the key secret was last written back and read (see `sync_secret`).
    synced: Mutex<Option<Instant>>,
    /// The rosters its stores announce this instance in (see `announcing`).
    pub(crate) rosters: Rosters,
}

impl Conn {
    pub(crate) fn new(backend: Backend, connect_timeout: Duration, secret: SecretSource) -> Self {
        Self {
            backend,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                // The store applies its own, shorter, per-call timeout.
                .set_response_timeout(None),
            connect_timeout,
            scripts: Mutex::default(),
            secret: SecretCell::new(secret),
            slot: Mutex::new(Slot::default()),
            ready: Notify::new(),
            synced: Mutex::new(None),
            rosters: Rosters::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a store's script (once per source): every connect loads
    /// it, and a call loads it first when the current connection has not.
    pub(crate) fn register(&self, source: &str) -> Arc<ScriptSlot> {
        let mut scripts = self.scripts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = scripts.iter().find(|s| s.source == source) {
            return Arc::clone(s);
        }
        let slot = Arc::new(ScriptSlot {
            source: source.to_owned(),
            script: redis::Script::new(source),
            loaded: AtomicU64::new(0),
        });
        scripts.push(Arc::clone(&slot));
        slot
    }

    /// Starts connecting in the background now, on the current tokio
    /// runtime (none: the first call connects).
    pub(crate) fn start(self: &Arc<Self>) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let mut slot = self.lock();
        if slot.conn.is_none() && !slot.connecting {
            slot.connecting = true;
            tokio::spawn(Arc::clone(self).connect());
        }
    }

    /// The connection and its generation. Waits for a connect if needed:
    /// up to the connect timeout for the first one, else up to `wait`.
    pub(crate) async fn get(self: &Arc<Self>, wait: Duration) -> Result<(Handle, u64), Failure> {
        let mut notified = pin!(self.ready.notified());
        let bound = {
            let mut slot = self.lock();
            if let Some((c, g)) = &slot.conn {
                return Ok((c.clone(), *g));
            }
            notified.as_mut().enable();
            if !slot.connecting {
                slot.connecting = true;
                tokio::spawn(Arc::clone(self).connect());
            }
            if slot.tried {
                wait
            } else {
                self.connect_timeout.max(wait)
            }
        };
        if tokio::time::timeout(bound, notified).await.is_err() {
            return Err(Failure::new(
                Kind::Timeout,
                format!("no connection within {bound:?}"),
            ));
        }
        let slot = self.lock();
        match &slot.conn {
            Some((c, g)) => Ok((c.clone(), *g)),
            None => Err(slot
                .last_error
                .clone()
                .unwrap_or_else(|| Failure::new(Kind::Io, "not connected"))),
        }
    }

    /// The connection, with `script` loaded on it: loaded by the connect
    /// for the stores built before it, else here, once per connection, up
    /// to the connect timeout (never charged to a check's timeout).
    pub(crate) async fn ready(
        self: &Arc<Self>,
        script: &ScriptSlot,
        wait: Duration,
    ) -> Result<(Handle, u64), Failure> {
        let (mut c, g) = self.get(wait).await?;
        if script.loaded.load(Ordering::Acquire) != g {
            let invocation = script.script.prepare_invoke();
            let load = invocation.load_async(&mut c);
            // A failed load (NOPERM for SCRIPT LOAD, say) is not retried on
            // this connection: EVALSHA still reloads on NOSCRIPT.
            let _ = tokio::time::timeout(self.connect_timeout, load).await;
            script.loaded.store(g, Ordering::Release);
        }
        Ok((c, g))
    }

    async fn connect(self: Arc<Self>) {
        let this = Arc::clone(&self);
        let open = async move {
            let driven =
                crate::connect::driver::drive(async move { this.backend.open(&this.config).await });
            driven.await.unwrap_or_else(|why| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "connect failed",
                    why,
                )))
            })
        };
        // Bounded whole (a server that accepts but never answers the
        // handshake), so that `connecting` always ends.
        let result = match tokio::time::timeout(self.connect_timeout, open).await {
            Ok(r) => r,
            Err(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "connect timed out",
            ))),
        };
        let scripts: Vec<Arc<ScriptSlot>> = self
            .scripts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let result = match result {
            Ok(mut c) => {
                // The scripts in one round trip, so that the first check is
                // one round trip too (EVALSHA still reloads on NOSCRIPT,
                // e.g. after a SCRIPT FLUSH or a failover).
                let mut pipe = redis::pipe();
                for s in &scripts {
                    pipe.cmd("SCRIPT").arg("LOAD").arg(&s.source).ignore();
                }
                let loaded =
                    tokio::time::timeout(self.connect_timeout, pipe.query_async::<()>(&mut c))
                        .await
                        .is_ok_and(|r| r.is_ok());
                if !loaded {
                    tracing::debug!(target: "ratelimit_redis", "scripts not loaded at connect; EVALSHA loads them");
                }
                let _ =
                    tokio::time::timeout(self.connect_timeout, self.exchange_secret(&mut c)).await;
                Ok(c)
            }
            Err(e) => Err(e),
        };
        {
            let mut slot = self.lock();
            slot.connecting = false;
            slot.tried = true;
            match result {
                Ok(c) => {
                    slot.generation += 1;
                    for s in &scripts {
                        s.loaded.store(slot.generation, Ordering::Release);
                    }
                    slot.conn = Some((c, slot.generation));
                    slot.last_error = None;
                    #[cfg(feature = "sentinel")]
                    if let Some(sentinel) = self.sentinel() {
                        sentinel.watch(&self);
                    }
                    if self.rosters.start() {
                        // On the driver thread: it outlives the caller's
                        // runtime, and a busy one does not delay it.
                        crate::connect::driver::spawn(announcing(Arc::downgrade(&self)));
                    }
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

    /// Writes this instance's key secret with `SET NX` (a fresh one if it
    /// has none yet) and adopts what Redis then holds: the secret of the
    /// first instance, or this one's again after Redis lost it.
    async fn exchange_secret(&self, c: &mut Handle) -> Result<(), Failure> {
        let Some(key) = self.secret.redis_key() else {
            return Ok(());
        };
        let (held,): (String,) = redis::pipe()
            .cmd("SET")
            .arg(key)
            .arg(self.secret.candidate())
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(key)
            .query_async(c)
            .await
            .map_err(|e| Failure::redis(&e))?;
        match self.secret.adopt(&held) {
            Ok(false) => Ok(()),
            Ok(true) => {
                tracing::warn!(
                    target: "ratelimit_redis",
                    key,
                    "the key secret in redis differs from this instance's: secret keys are renamed, their counts restart"
                );
                Ok(())
            }
            Err(why) => {
                tracing::error!(target: "ratelimit_redis", key, why, "unreadable key secret in redis");
                Err(Failure::new(
                    Kind::Reply,
                    format!("key secret at {key}: {why}"),
                ))
            }
        }
    }

    /// Restores the key secret if Redis lost it (a `FLUSHALL`, a failover
    /// to an empty replica): `SET NX` of the cached one, then a read.
    pub(crate) async fn sync_secret(self: &Arc<Self>, wait: Duration) -> Result<(), Failure> {
        if self.secret.redis_key().is_none() {
            return Ok(());
        }
        *self.synced.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let (mut c, _) = self.get(wait).await?;
        match tokio::time::timeout(wait, self.exchange_secret(&mut c)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no answer within {wait:?}"),
            )),
        }
    }

    /// Whether the key secret was last synced `every` ago or more.
    pub(crate) fn sync_due(&self, every: Duration) -> bool {
        self.secret.redis_key().is_some()
            && self
                .synced
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none_or(|t| t.elapsed() >= every)
    }

    /// A pub/sub connection to where the store connects (a Sentinel's
    /// master as they name it now, one of a Cluster's nodes in turn),
    /// within the connect timeout; `None` on a Cluster whose nodes it does
    /// not know (see [`ClusterTarget`](crate::ClusterTarget)).
    pub(crate) async fn pubsub(&self) -> Option<redis::RedisResult<redis::aio::PubSub>> {
        let open = async {
            match &self.backend {
                Backend::Single(client) => Some(client.get_async_pubsub().await),
                #[cfg(feature = "cluster")]
                Backend::Cluster(cluster) => cluster.pubsub().await,
                #[cfg(feature = "sentinel")]
                Backend::Sentinel(sentinel) => Some(sentinel.pubsub().await),
            }
        };
        match tokio::time::timeout(self.connect_timeout, open).await {
            Ok(r) => r,
            Err(_) => Some(Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "pub/sub connect timed out",
            )))),
        }
    }

    /// Drops connection `generation` (broken), unless already replaced.
    pub(crate) fn invalidate(&self, generation: u64) {
        let mut slot = self.lock();
        if matches!(slot.conn, Some((_, g)) if g == generation) {
            slot.conn = None;
        }
    }

    /// Connects afresh in the background, keeping the current connection
    /// until the new one is ready (a wedged socket is replaced; a healthy
    /// one keeps serving the breaker's probes meanwhile).
    pub(crate) fn refresh(self: &Arc<Self>) {
        if tokio::runtime::Handle::try_current().is_err() {
            self.lock().conn = None;
            return;
        }
        let mut slot = self.lock();
        if !slot.connecting {
            slot.connecting = true;
            tokio::spawn(Arc::clone(self).connect());
        }
    }
}

/// Announces the instance in its rosters every
/// [`INSTANCE_ANNOUNCE_EVERY`], on the connection in hand (none: skipped,
/// the counts kept), for as long as the connection's stores live.
async fn announcing(conn: Weak<Conn>) {
    loop {
        let Some(conn) = conn.upgrade() else {
            return;
        };
        let handle = conn.lock().conn.as_ref().map(|(c, _)| c.clone());
        if let Some(mut c) = handle {
            conn.rosters.announce(&mut c, conn.connect_timeout).await;
        }
        drop(conn);
        tokio::time::sleep(INSTANCE_ANNOUNCE_EVERY).await;
    }
}

#[cfg(feature = "sentinel")]
impl Follower for Conn {
    fn sentinel(&self) -> Option<&SentinelBackend> {
        match &self.backend {
            Backend::Sentinel(s) => Some(s),
            _ => None,
        }
    }

    fn refresh(self: &Arc<Self>) {
        Conn::refresh(self);
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}
