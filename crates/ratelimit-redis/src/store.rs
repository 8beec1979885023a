//! The Redis store: its builder, its calls and its failure policy.

use crate::breaker::{Breaker, BreakerConfig, BreakerState, Outcome};
use crate::conn::{Backend, Conn};
use crate::failure::{Failure, Kind};
use crate::log_throttle::{LogThrottle, LOG_EVERY};
use crate::plan::{key_phase, Plan};
use crate::BuildError;
use ratelimit_core::{Algorithm, AnyAlgorithm, Decision, MemoryStore, Store, StoreError};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The default per-call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "ratelimit:";
/// Extra lifetime of a key past the moment its state is full again, so
/// that a key never vanishes early.
const TTL_SLACK_MS: u64 = 1_000;
/// Ages above this are clamped (the scripts keep numbers below 2^53).
const MAX_AGE: u64 = 1 << 52;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Where the time of a check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeSource {
    /// The Redis server's `TIME`, read inside the script (the default): the
    /// instances' clocks don't matter, and the `now` passed to
    /// [`Store::check`] is ignored (it is still used by the in-memory
    /// fallback). For a refund, the caller's `now - admitted_at` is taken
    /// back from the server's time.
    #[default]
    Redis,
    /// The `now` passed by the caller, as nanoseconds since the Unix epoch
    /// (or any origin shared by every instance). Decisions are then
    /// identical, field for field, to a [`MemoryStore`] given the same
    /// times; meant for tests and for fleets with synchronised clocks.
    Caller,
}

/// Where a store connects: a URL (`redis://host:port/db`) or a client.
#[derive(Debug, Clone)]
pub enum Target {
    /// A connection URL, parsed when the store is built.
    Url(String),
    /// A configured client.
    Client(redis::Client),
    /// A Redis Cluster (feature `cluster`). Every check touches one key,
    /// whose hash tag is the caller's key, so it goes to one node.
    #[cfg(feature = "cluster")]
    Cluster(Box<redis::cluster::ClusterClient>),
}

#[cfg(feature = "cluster")]
impl From<redis::cluster::ClusterClient> for Target {
    fn from(client: redis::cluster::ClusterClient) -> Self {
        Self::Cluster(Box::new(client))
    }
}

impl From<&str> for Target {
    fn from(url: &str) -> Self {
        Self::Url(url.to_owned())
    }
}

impl From<String> for Target {
    fn from(url: String) -> Self {
        Self::Url(url)
    }
}

impl From<redis::Client> for Target {
    fn from(client: redis::Client) -> Self {
        Self::Client(client)
    }
}

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    target: Target,
    algorithm: AnyAlgorithm,
    prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    breaker: BreakerConfig,
    fallback: Option<usize>,
    time: TimeSource,
}

impl RedisStoreBuilder {
    /// The prefix of every key (default `ratelimit:`). A key is
    /// `{prefix}{{key}}:{algorithm}:{fingerprint}`: the caller's key is the
    /// Redis Cluster hash tag, and the fingerprint of the algorithm and its
    /// parameters keeps two limits on the same key apart. The prefix must
    /// not contain `{` or `}`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest a check or a refund waits for Redis, connecting
    /// included, before the failure policy applies (default 50 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a background (re)connect may take (default 1 s). Calls
    /// never wait longer than [`timeout`](Self::timeout) for it.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The circuit breaker's settings (default: open after 5 consecutive
    /// failures, probe after 1 s).
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// Whenever Redis gives no decision (a timeout, a connection error,
    /// an error reply of any kind, the breaker open), decide locally with
    /// an in-memory store of the same algorithm, holding at most `max_keys`
    /// keys, instead of returning an error. Each instance then limits on
    /// its own. See the crate docs for the table of failures.
    pub fn fallback_to_memory(mut self, max_keys: usize) -> Self {
        self.fallback = Some(max_keys.max(1));
        self
    }

    /// Where the time of a check comes from (default: the server's `TIME`).
    pub fn time_source(mut self, time: TimeSource) -> Self {
        self.time = time;
        self
    }

    /// The store. It connects lazily, in the background, on first use: a
    /// service starts even while Redis is down.
    ///
    /// Fails on a bad URL, a prefix with braces, or an algorithm whose
    /// numbers exceed the range the scripts compute exactly in (periods up
    /// to 26 days for the windows; see the crate docs).
    pub fn build(self) -> Result<RedisStore, BuildError> {
        if self.prefix.contains(['{', '}']) {
            return Err(BuildError::Prefix(self.prefix));
        }
        let backend = match self.target {
            Target::Url(url) => Backend::Single(
                redis::Client::open(url.as_str())
                    .map_err(|e| BuildError::Url(format!("{url}: {e}")))?,
            ),
            Target::Client(c) => Backend::Single(c),
            #[cfg(feature = "cluster")]
            Target::Cluster(c) => Backend::Cluster(c),
        };
        let plan = Plan::new(&self.algorithm, self.time == TimeSource::Caller)?;
        let script = redis::Script::new(&plan.source);
        let fallback = self.fallback.map(|max| Fallback {
            memory: MemoryStore::<AnyAlgorithm, String>::builder(self.algorithm)
                .max_keys(Some(max))
                .build::<String>(),
        });
        Ok(RedisStore {
            inner: Arc::new(Inner {
                conn: Arc::new(Conn::new(
                    backend,
                    self.connect_timeout,
                    vec![script.clone()],
                )),
                script,
                plan,
                algorithm: self.algorithm,
                prefix: self.prefix,
                timeout: self.timeout,
                breaker: Breaker::new(self.breaker),
                fallback,
                time: self.time,
                log: LogThrottle::new(LOG_EVERY),
            }),
        })
    }
}

/// A rate-limit store in Redis, for any of the six algorithms of
/// ratelimit-core, deciding exactly as they do.
///
/// Each check is one atomic round trip (a Lua script through `EVALSHA`,
/// reloaded on `NOSCRIPT`) on a shared multiplexed connection. See the
/// crate docs for the failure policy. Cloning is cheap and shares
/// everything.
///
/// ```no_run
/// use ratelimit_core::{Gcra, Store};
/// use ratelimit_redis::RedisStore;
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::builder("redis://127.0.0.1/", Gcra::new(100, Duration::from_secs(60))?)
///     .prefix("api:")
///     .timeout(Duration::from_millis(20))
///     .fallback_to_memory(100_000)
///     .build()?;
/// let decision = store.check("10.0.0.1", 1, 0).await?;
/// println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Arc<Conn>,
    script: redis::Script,
    plan: Plan,
    algorithm: AnyAlgorithm,
    prefix: String,
    timeout: Duration,
    breaker: Breaker,
    fallback: Option<Fallback>,
    time: TimeSource,
    /// Which failures get a warning line.
    log: LogThrottle<{ Kind::COUNT }>,
}

/// The in-memory fallback. Calls reach it out of order (one after a
/// timeout, the next at once); the memory store decides a call whose time
/// is older than its latest at that latest time, so a key's time never
/// goes back.
struct Fallback {
    memory: MemoryStore<AnyAlgorithm, String>,
}

impl Fallback {
    fn check(&self, key: &str, cost: u64, now: u64) -> Result<Decision, StoreError> {
        self.memory.check(key, cost, now)
    }

    fn refund(&self, key: &str, cost: u64, admitted_at: u64, now: u64) {
        self.memory.refund(key, cost, admitted_at, now);
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("algorithm", &self.inner.algorithm)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("breaker", &self.inner.breaker.state())
            .field("fallback", &self.inner.fallback.is_some())
            .field("time", &self.inner.time)
            .finish_non_exhaustive()
    }
}

enum Op {
    Check,
    Refund { admitted_at: u64 },
}

impl RedisStore {
    /// A builder for a store on `target` (a URL or a [`redis::Client`])
    /// deciding with `algorithm` (any of ratelimit-core's six, or an
    /// [`AnyAlgorithm`]).
    pub fn builder(
        target: impl Into<Target>,
        algorithm: impl Into<AnyAlgorithm>,
    ) -> RedisStoreBuilder {
        RedisStoreBuilder {
            target: target.into(),
            algorithm: algorithm.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            breaker: BreakerConfig::default(),
            fallback: None,
            time: TimeSource::Redis,
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &AnyAlgorithm {
        &self.inner.algorithm
    }

    /// The circuit breaker's current state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// The Redis key holding `key`'s state.
    pub fn redis_key(&self, key: &str) -> String {
        self.inner.redis_key(key)
    }

    /// The SHA1 of the store's script (what `EVALSHA` is called with).
    pub fn script_hash(&self) -> &str {
        self.inner.script.get_hash()
    }

    /// The script's arguments for a check of `key` at `now` (`None`: the
    /// server's time), as `EVALSHA hash 1 KEYS[1] ARGV...` takes them; for
    /// benchmarks and debugging with other clients.
    pub fn script_args(&self, key: &str, cost: u64, now: Option<u64>) -> Vec<String> {
        let mut args = vec![self.redis_key(key)];
        args.extend(self.inner.args(key, cost, now, None));
        args
    }

    /// Connects now (instead of on first use) and checks that Redis
    /// answers, within the store's timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let work = async {
            let (mut c, _) = inner
                .conn
                .get()
                .await
                .map_err(|f| StoreError::Backend(f.to_string()))?;
            redis::cmd("PING")
                .query_async::<()>(&mut c)
                .await
                .map_err(|e| StoreError::Backend(format!("redis: {e}")))
        };
        tokio::time::timeout(inner.timeout, work)
            .await
            .map_err(|_| {
                StoreError::Backend(format!("redis: no answer within {:?}", inner.timeout))
            })?
    }

    fn render<K: fmt::Display + ?Sized>(key: &K) -> String {
        key.to_string()
    }
}

impl Inner {
    fn redis_key(&self, key: &str) -> String {
        format!("{}{{{key}}}:{}", self.prefix, self.plan.tag)
    }

    fn args(
        &self,
        key: &str,
        cost: u64,
        now: Option<u64>,
        refund: Option<(u64, u64)>,
    ) -> Vec<String> {
        let mut a = Vec::with_capacity(7 + self.plan.params.len());
        a.push(if refund.is_some() { "r" } else { "c" }.to_owned());
        a.push(cost.to_string());
        match now {
            Some(t) => {
                a.push((t / NANOS_PER_SEC).to_string());
                a.push((t % NANOS_PER_SEC).to_string());
            }
            None => {
                a.push(String::new());
                a.push(String::new());
            }
        }
        match (refund, now) {
            (Some((admitted_at, _)), Some(_)) => {
                a.push((admitted_at / NANOS_PER_SEC).to_string());
                a.push((admitted_at % NANOS_PER_SEC).to_string());
            }
            (Some((admitted_at, caller_now)), None) => {
                let age = caller_now.saturating_sub(admitted_at).min(MAX_AGE);
                a.push(age.to_string());
                a.push(String::new());
            }
            (None, _) => {
                a.push(String::new());
                a.push(String::new());
            }
        }
        a.push(TTL_SLACK_MS.to_string());
        a.extend(self.plan.params.iter().cloned());
        if let (Some(i), Some(phase)) = (self.plan.phase_index, key_phase(&self.algorithm, key)) {
            a[7 + i] = phase.to_string();
        }
        a
    }

    async fn call(&self, key: &str, cost: u64, now: u64, op: &Op) -> Result<Vec<i64>, Failure> {
        let time = match self.time {
            TimeSource::Redis => None,
            TimeSource::Caller => Some(now),
        };
        let refund = match op {
            Op::Check => None,
            Op::Refund { admitted_at } => Some((*admitted_at, now)),
        };
        let (mut conn, generation) = self.conn.get().await?;
        let mut invocation = self.script.key(self.redis_key(key));
        for a in self.args(key, cost, time, refund) {
            invocation.arg(a);
        }
        // A check answers 5 numbers, a refund 4.
        let len = if refund.is_some() { 4 } else { 5 };
        match invocation.invoke_async::<Vec<i64>>(&mut conn).await {
            Ok(v) if v.len() == len && (v[0] == 0 || v[0] == 1) => Ok(v),
            Ok(v) => Err(Failure::new(
                Kind::Reply,
                format!(
                    "redis: unexpected script reply of {} numbers, starting {:?}",
                    v.len(),
                    &v[..v.len().min(4)]
                ),
            )),
            Err(e) => {
                if e.is_unrecoverable_error() || e.is_io_error() {
                    self.conn.invalidate(generation);
                }
                Err(Failure::redis(&e))
            }
        }
    }

    /// Runs `op` under the breaker and the timeout.
    async fn guarded(&self, key: &str, cost: u64, now: u64, op: Op) -> Result<Vec<i64>, Failure> {
        let Some(permit) = self.breaker.admit() else {
            return Err(Failure::new(Kind::BreakerOpen, "circuit breaker open"));
        };
        let result = tokio::time::timeout(self.timeout, self.call(key, cost, now, &op)).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no answer within {:?}", self.timeout),
            )),
        };
        // Anything but a decision counts against Redis: an error reply
        // (OOM, NOPERM, READONLY, a foreign value at the key, ...) as much
        // as a timeout.
        let outcome = match &result {
            Ok(_) => Outcome::Answered,
            Err(_) => Outcome::Failed,
        };
        if permit.settle(outcome) {
            // Opened: the next probe starts from a fresh connection.
            self.conn.reset();
        }
        result
    }

    fn decision(&self, v: &[i64]) -> Decision {
        let nanos = |x: i64| Duration::from_nanos(u64::try_from(x).unwrap_or(0));
        let remaining = u64::try_from(v[1]).unwrap_or(0);
        let reset = nanos(v[3]);
        // The wait for one unit, the scripts' fifth number.
        let next = v.get(4).map_or(Duration::ZERO, |&x| nanos(x));
        Decision::new(
            v[0] == 1,
            remaining,
            (v[2] >= 0).then(|| nanos(v[2])),
            self.algorithm.limit(),
            self.algorithm.window(),
            reset,
            next,
        )
    }

    async fn check(&self, key: String, cost: u64, now: u64) -> Result<Decision, StoreError> {
        match self.guarded(&key, cost, now, Op::Check).await {
            Ok(v) => Ok(self.decision(&v)),
            Err(failure) => {
                self.report(&failure, &key);
                match &self.fallback {
                    Some(memory) => {
                        #[cfg(feature = "metrics")]
                        metrics::counter!("ratelimit_redis_fallback_total").increment(1);
                        memory.check(&key, cost, now)
                    }
                    None => Err(StoreError::Backend(failure.to_string())),
                }
            }
        }
    }

    async fn refund(
        &self,
        key: String,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        if self.breaker.state() == BreakerState::Open {
            if let Some(memory) = &self.fallback {
                memory.refund(&key, cost, admitted_at, now);
                return Ok(());
            }
        }
        match self
            .guarded(&key, cost, now, Op::Refund { admitted_at })
            .await
        {
            Ok(_) => Ok(()),
            Err(failure) => {
                self.report(&failure, &key);
                match &self.fallback {
                    Some(memory) => {
                        memory.refund(&key, cost, admitted_at, now);
                        Ok(())
                    }
                    None => Err(StoreError::Backend(failure.to_string())),
                }
            }
        }
    }

    /// Counts a failure (`ratelimit_redis_errors_total{kind}`) and warns of
    /// it, a few lines a minute per kind at most, each with the number of
    /// failures of its kind not logged since the previous line. Calls
    /// skipped by the open breaker are counted, not logged: the breaker
    /// logs its opening.
    fn report(&self, failure: &Failure, key: &str) {
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_errors_total", "kind" => failure.kind.as_str())
            .increment(1);
        if failure.kind == Kind::BreakerOpen {
            return;
        }
        if let Some(suppressed) = self
            .log
            .admit(failure.kind.index(), tokio::time::Instant::now())
        {
            tracing::warn!(
                target: "ratelimit_redis",
                kind = failure.kind.as_str(),
                error = ?failure.message,
                key = ?key,
                suppressed,
                fallback = self.fallback.is_some(),
                "redis gave no decision; the failure policy applies (in-memory fallback, or an error)"
            );
        }
    }
}

/// The future of a [`RedisStore`] call.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

impl<K> Store<K> for RedisStore
where
    K: fmt::Display + Send + Sync + ?Sized,
{
    type CheckFuture = StoreFuture<Decision>;
    type RefundFuture = StoreFuture<()>;

    /// Decides in Redis (see [`TimeSource`] for what `now` is used for).
    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture {
        let inner = Arc::clone(&self.inner);
        let key = Self::render(key);
        Box::pin(async move { inner.check(key, cost, now).await })
    }

    /// Gives back `cost` admitted at `admitted_at` (the caller's clock,
    /// like `now`).
    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture {
        let inner = Arc::clone(&self.inner);
        let key = Self::render(key);
        Box::pin(async move { inner.refund(key, cost, admitted_at, now).await })
    }

    /// Bounded upkeep of the in-memory fallback, if any (see
    /// [`MemoryStore::maintain`]): the keys it took during an outage are
    /// dropped once full, and its memory given back.
    fn maintain(&self, now: u64) {
        if let Some(fallback) = &self.inner.fallback {
            fallback.memory.maintain(now);
        }
    }
}
