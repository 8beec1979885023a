//! The Redis store: its builder, its calls and its failure policy.

use crate::args::{BanArgs, CallArgs, CommonArgs, OpArg, Params};
use crate::breaker::{Breaker, BreakerConfig, BreakerState, Outcome};
use crate::conn::{Conn, Handle, ScriptSlot};
use crate::deny_cache::DenyCache;
use crate::failure::{Failure, Kind};
use crate::invalidation::{self, Change, Listener};
use crate::key_secret::{hashed, SecretSource, SECRET_SUFFIX};
use crate::lease::{Leases, Spend, Unspent};
use crate::log_throttle::{LogThrottle, LOG_EVERY};
use crate::plan::{key_phase, multi_source, Plan};
use crate::target::Target;
use crate::BuildError;
use crate::StoreState;
use ratelimit_core::{
    AdminFuture, Algorithm, AnyAlgorithm, BanLeftFuture, BanPolicy, Decision, MemoryStore,
    SettleFuture, StableKey, Store, StoreCounts, StoreError,
};
use redis::ToRedisArgs;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The default per-call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "ratelimit:";
/// The default size of the local deny cache, in keys (see
/// [`RedisStoreBuilder::deny_cache`]).
pub const DEFAULT_DENY_CACHE: usize = 16_384;
/// Extra lifetime of a key past the moment its state is full again, so
/// that a key never vanishes early.
const TTL_SLACK_MS: u64 = 1_000;
/// Ages above this are clamped (the scripts keep numbers below 2^53).
const MAX_AGE: u64 = 1 << 52;
const NANOS_PER_SEC: u64 = 1_000_000_000;
/// The most keys holding a lease at once (see
/// [`RedisStoreBuilder::lease`]).
pub const DEFAULT_LEASES: usize = 4_096;
/// The most limits one store checks together.
pub const MAX_LIMITS: usize = 16;
/// How often [`Store::maintain`] writes the shared key secret back and
/// reads it (see [`RedisStoreBuilder::key_secret`]).
pub const KEY_SECRET_SYNC: Duration = Duration::from_secs(1);

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

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    target: Target,
    algorithm: AnyAlgorithm,
    more: Vec<AnyAlgorithm>,
    prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    breaker: BreakerConfig,
    fallback: Option<usize>,
    time: TimeSource,
    deny_cache: usize,
    lease: Option<(u64, Duration)>,
    key_secret: Option<[u8; 16]>,
    ban: Option<BanPolicy>,
    /// The limit's name in metrics labels.
    name: String,
    /// Keys and states of a live store (see `Plan::live`).
    pub(crate) live: bool,
    /// A connection shared with other stores (a live store's versions).
    pub(crate) conn: Option<Arc<Conn>>,
    /// The size of the lease table.
    pub(crate) lease_slots: usize,
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

    /// The limit's name, as the `limit` label of the store's metrics (its
    /// errors, fallback decisions, deny-cache hits and breaker). Default:
    /// empty. [`StoreSettings`](crate::StoreSettings) sets it to the
    /// limit's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The longest a check or a refund waits for Redis's answer before the
    /// failure policy applies (default 50 ms). A call also waits up to this
    /// long for a reconnect, and for the store's first connection up to
    /// the [`connect_timeout`](Self::connect_timeout): the first check
    /// after start never times out on connecting or loading the script.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a background (re)connect may take, loading the scripts
    /// and reading the key secret included (default 1 s). Calls wait for
    /// the store's first connection up to this long (building starts it,
    /// on a tokio runtime), for a later one up to the
    /// [`timeout`](Self::timeout).
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

    /// Adds a limit checked together with the store's others, on the same
    /// key, in the same script and round trip, all or nothing: a request
    /// is admitted when every limit admits it, and then every limit
    /// records its cost; when one denies, none records anything (the
    /// limits are checked in order, and the state of those that admitted
    /// before the denial is put back within the script). Exact under
    /// concurrency, like several limits on one key in memory, and in one
    /// hash slot on a Cluster: every limit's Redis key has the caller's key
    /// as its hash tag.
    ///
    /// The store's [`Decision`] is then the combined one: when denied, the
    /// denying limit's; when admitted, the decision of the limit with the
    /// fewest `remaining` (the first of those), with the longest `wait`
    /// (the leaky bucket's hold) of all. Its `limit` and `window` are that
    /// limit's. At most [`MAX_LIMITS`] limits, no two the same.
    ///
    /// ```
    /// use ratelimit_core::{FixedWindow, Gcra};
    /// use ratelimit_redis::RedisStore;
    /// use std::time::Duration;
    ///
    /// // 10 a second in bursts, and 1000 an hour: one round trip per check.
    /// // (Building connects to nothing: the first check does.)
    /// let store = RedisStore::builder("redis://127.0.0.1/", Gcra::new(10, Duration::from_secs(1))?)
    ///     .and_limit(FixedWindow::new(1000, Duration::from_secs(3600))?)
    ///     .build()?;
    /// assert_eq!(store.algorithms().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn and_limit(mut self, algorithm: impl Into<AnyAlgorithm>) -> Self {
        self.more.push(algorithm.into());
        self
    }

    /// Local leases (off by default): a cost-1 check of a hot key (one
    /// checked within `ttl` before) with no lease takes `size` units from
    /// Redis at once (one check of cost `size`, at most the smallest
    /// limit's capacity; when fewer are left, what is left), and this
    /// store spends them on the key's next cost-1 checks without a round
    /// trip, for up to `ttl`; the units still unspent then
    /// are given back (refunded, with the take's time as `admitted_at`),
    /// as are those of a lease evicted from the table ([`DEFAULT_LEASES`]
    /// keys) and, at [`maintain`](Store::maintain), those of expired
    /// leases. [`release_leases`](RedisStore::release_leases) gives every
    /// lease back (at shutdown); dropping the store spawns the same on
    /// the current tokio runtime, if any. When not even 2 units are left,
    /// the check is an ordinary cost-1 check. `size` below 2 turns leases
    /// off.
    ///
    /// Exactness: see the crate docs, "Leases". With `k` instances and
    /// leases of `n`, the limit can be exceeded by up to `k * (n - 1)`
    /// requests in a window, and units held unspent by idle instances are
    /// missing for up to `ttl`.
    pub fn lease(mut self, size: u64, ttl: Duration) -> Self {
        self.lease = (size >= 2).then_some((size, ttl));
        self
    }

    /// The local deny cache holds at most `max_keys` keys (default
    /// [`DEFAULT_DENY_CACHE`], rounded up to a power of two); `0` turns it
    /// off, and every check goes to Redis.
    ///
    /// Once Redis denies a cost-1 check of a key with wait `w`, this store
    /// answers that key's cost-1 checks itself until `w` has passed: no
    /// round trip, and the decision Redis would give (denied, `remaining`
    /// 0, the wait and reset counted down). A refund from this store
    /// clears the key. See the crate docs, "The deny cache", for what it
    /// can get wrong when other instances share the key.
    pub fn deny_cache(mut self, max_keys: usize) -> Self {
        self.deny_cache = max_keys;
        self
    }

    /// The secret that keys marked secret ([`StableKey::is_secret`]: API
    /// keys, bearer tokens, headers marked secret) are hashed with before
    /// they name a Redis key: `{prefix}{#<32 hex digits>}:...`, the keyed
    /// SipHash-2-4 (128 bits) of the key's text, never the text. Every
    /// instance sharing the Redis must use the same secret: give it here
    /// (from the settings), or leave it unset and the store shares one
    /// through Redis at `{prefix}key-secret` (the first instance writes a
    /// random one with `SET NX`, every instance reads it at connect and
    /// caches it; see the crate docs, "Secret keys", for what happens when
    /// Redis loses it).
    pub fn key_secret(mut self, secret: [u8; 16]) -> Self {
        self.key_secret = Some(secret);
        self
    }

    /// Bans a key when the store denies it (default: no ban): every check
    /// of it is then denied until the ban ends, whatever the algorithm
    /// says (see [`BanPolicy`]), on every instance sharing the Redis. The
    /// ban lives beside the key's state, at `{prefix}{key}:ban` (the same
    /// hash slot), with a `PX` expiry past its end, and is read and set
    /// inside the check's script: atomic with the check. Bans by code
    /// ([`Store::ban`]) work on every store, with or without this.
    pub fn ban(mut self, ban: Option<BanPolicy>) -> Self {
        self.ban = ban;
        self
    }

    /// Whether limits were added with [`and_limit`](Self::and_limit).
    #[cfg(feature = "live")]
    pub(crate) fn has_more_limits(&self) -> bool {
        !self.more.is_empty()
    }

    /// The same settings for `algorithm`.
    #[cfg(feature = "live")]
    pub(crate) fn with_algorithm(mut self, algorithm: AnyAlgorithm) -> Self {
        self.algorithm = algorithm;
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
        let backend = self.target.into_backend()?;
        let algorithms: Vec<AnyAlgorithm> =
            std::iter::once(self.algorithm).chain(self.more).collect();
        if algorithms.len() > MAX_LIMITS {
            return Err(BuildError::Unsupported(format!(
                "{} limits in one store (at most {MAX_LIMITS})",
                algorithms.len()
            )));
        }
        let mut parts: Vec<Part> = Vec::with_capacity(algorithms.len());
        for algorithm in algorithms {
            let mut plan = Plan::new(&algorithm, self.time == TimeSource::Caller)?;
            if self.live {
                plan = plan.live(&algorithm);
            }
            if parts.iter().any(|p| p.plan.tag == plan.tag) {
                return Err(BuildError::Unsupported(format!(
                    "the same limit twice in one store ({algorithm:?})"
                )));
            }
            parts.push(Part { algorithm, plan });
        }
        let min_limit = parts.iter().map(|p| p.algorithm.limit()).min().unwrap_or(0);
        let source = match parts.as_slice() {
            [one] => one.plan.source.clone(),
            _ => multi_source(parts.iter().map(|p| &p.plan)),
        };
        let wrapped =
            include_str!("lua/ban.lua").replacen("\n--@inner\n", &format!("\n{source}\n"), 1);
        let source = without_comments(&wrapped);
        let secret = match self.key_secret {
            Some(bytes) => SecretSource::Fixed(bytes),
            None => SecretSource::Shared(format!("{}{SECRET_SUFFIX}", self.prefix)),
        };
        let conn = self
            .conn
            .unwrap_or_else(|| Arc::new(Conn::new(backend, self.connect_timeout, secret)));
        // Registered before connecting: the connect loads it.
        let script = conn.register(&source);
        conn.start();
        let fallback = self.fallback.map(|max| Fallback {
            memory: parts
                .iter()
                .map(|p| {
                    MemoryStore::<AnyAlgorithm, String>::builder(p.algorithm)
                        .max_keys(Some(max))
                        .ban(self.ban)
                        .build()
                })
                .collect(),
            lock: Mutex::new(()),
        });
        let label = interned(self.name);
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                script,
                parts: parts.into(),
                prefix: self.prefix,
                timeout: self.timeout,
                breaker: Breaker::labelled(self.breaker, label),
                label,
                fallback,
                time: self.time,
                log: LogThrottle::new(LOG_EVERY),
                deny: (self.deny_cache > 0).then(|| DenyCache::new(self.deny_cache)),
                ban: BanArgs::of(self.ban.as_ref()),
                leases: self
                    .lease
                    // A lease above the smallest capacity is never granted.
                    .map(|(size, ttl)| (size.min(min_limit), ttl))
                    .filter(|&(size, _)| size >= 2)
                    .map(|(size, ttl)| Leases::new(self.lease_slots, size, ttl)),
                origin: tokio::time::Instant::now(),
            }),
        };
        let listener = Arc::downgrade(&store.inner) as std::sync::Weak<dyn Listener>;
        invalidation::join(&store.inner.conn, &store.inner.prefix, listener);
        Ok(store)
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
/// ```
/// use ratelimit_core::{Clock, Gcra, Store, SystemClock};
/// use ratelimit_redis::RedisStore;
/// use std::time::Duration;
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let url = "redis://127.0.0.1/";
///     # // Nothing listens on port 1: this example runs on the fallback.
///     # let url = "redis://127.0.0.1:1/";
///     let store = RedisStore::builder(url, Gcra::new(100, Duration::from_secs(60))?)
///         .prefix("api:")
///         .timeout(Duration::from_millis(20))
///         .fallback_to_memory(100_000)
///         .build()?;
///     let clock = SystemClock::new();
///     let decision = store.check("10.0.0.1", 1, clock.now()).await?;
///     assert!(decision.allowed);
///     assert_eq!(decision.remaining, 99);
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Arc<Conn>,
    script: Arc<ScriptSlot>,
    /// The limits, checked in this order (one, usually).
    parts: Box<[Part]>,
    prefix: String,
    timeout: Duration,
    breaker: Breaker,
    /// The limit's name in metrics labels.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: &'static str,
    fallback: Option<Fallback>,
    time: TimeSource,
    /// Which failures get a warning line.
    log: LogThrottle<{ Kind::COUNT }>,
    /// Keys Redis denied, answered locally until their wait runs out.
    deny: Option<DenyCache>,
    /// The origin of the deny cache's clock with [`TimeSource::Redis`].
    origin: tokio::time::Instant,
    /// Units taken ahead for keys, spent locally.
    leases: Option<Leases>,
    /// The ban settings every call sends.
    ban: BanArgs,
}

/// One limit of a store: its algorithm and how Redis runs it.
struct Part {
    algorithm: AnyAlgorithm,
    plan: Plan,
}

/// The in-memory fallback, one memory store per limit. Calls reach it out
/// of order (one after a timeout, the next at once); the memory store
/// decides a call whose time is older than its latest at that latest
/// time, so a key's time never goes back.
struct Fallback {
    memory: Vec<MemoryStore<AnyAlgorithm, String>>,
    /// Makes a check of several limits all or nothing.
    lock: Mutex<()>,
}

impl Fallback {
    fn check(&self, key: &str, cost: u64, now: u64) -> Result<Decision, StoreError> {
        if let [one] = self.memory.as_slice() {
            return one.check_sync(key, cost, now);
        }
        let _all = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut decisions = Vec::with_capacity(self.memory.len());
        for (i, memory) in self.memory.iter().enumerate() {
            let d = memory.check_sync(key, cost, now)?;
            if !d.allowed {
                // Give back what the limits before it took, at once.
                for earlier in &self.memory[..i] {
                    earlier.refund_sync(key, cost, now, now);
                }
                return Ok(d);
            }
            decisions.push(d);
        }
        Ok(combine(decisions))
    }

    fn refund(&self, key: &str, cost: u64, admitted_at: u64, now: u64) {
        for memory in &self.memory {
            memory.refund_sync(key, cost, admitted_at, now);
        }
    }

    /// Settles every limit (see [`Store::settle`]), all under the lock.
    fn settle(
        &self,
        key: &str,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        let _all = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut decisions = Vec::with_capacity(self.memory.len());
        for memory in &self.memory {
            decisions.push(memory.settle_sync(key, reserved, actual, admitted_at, now)?);
        }
        Ok(settled(decisions).0)
    }

    fn maintain(&self, now: u64) {
        for memory in &self.memory {
            memory.maintain(now);
        }
    }

    /// What the fallback's stores hold, summed.
    fn counts(&self) -> StoreCounts {
        let mut sum = StoreCounts::default();
        for memory in &self.memory {
            sum += memory.counts();
        }
        sum
    }

    fn reset(&self, key: &str) {
        for memory in &self.memory {
            memory.reset_sync(key);
        }
    }

    fn ban(&self, key: &str, duration: Duration, now: u64) {
        for memory in &self.memory {
            memory.ban_sync(key, duration, now);
        }
    }

    fn unban(&self, key: &str) {
        for memory in &self.memory {
            memory.unban_sync(key);
        }
    }
}

/// The decision of several limits that all admitted: the one with the
/// fewest `remaining` (the first of those), with the longest `wait`.
/// The decision after a settlement of every limit, and the limit it comes
/// from: the first left in debt, if any, else all of them combined.
fn settled(decisions: Vec<Decision>) -> (Decision, usize) {
    match decisions.iter().position(|d| !d.allowed) {
        Some(i) => (decisions[i], i),
        None => (combine(decisions), 0),
    }
}

fn combine(decisions: Vec<Decision>) -> Decision {
    let wait = decisions.iter().filter_map(|d| d.wait).max();
    // One more unit is available when every limit has one.
    let next = decisions.iter().map(|d| d.next).max().unwrap_or_default();
    let mut best = decisions
        .into_iter()
        .reduce(|a, b| if b.remaining < a.remaining { b } else { a })
        .expect("a store has at least one limit");
    best.wait = wait;
    best.next = next;
    best
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field(
                "algorithms",
                &self
                    .inner
                    .parts
                    .iter()
                    .map(|p| p.algorithm)
                    .collect::<Vec<_>>(),
            )
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("breaker", &self.inner.breaker.state())
            .field("fallback", &self.inner.fallback.is_some())
            .field("time", &self.inner.time)
            .field(
                "deny_cache",
                &self.inner.deny.as_ref().map_or(0, DenyCache::capacity),
            )
            .finish_non_exhaustive()
    }
}

enum Op {
    Check,
    Refund {
        admitted_at: u64,
    },
    /// A ban of `cost` ms from now.
    Ban,
    /// A settlement: up charges `cost` whatever is left, down refunds it
    /// as admitted at `admitted_at`; both answer a peek.
    Settle {
        admitted_at: u64,
        up: bool,
    },
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
            more: Vec::new(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            breaker: BreakerConfig::default(),
            fallback: None,
            time: TimeSource::Redis,
            deny_cache: DEFAULT_DENY_CACHE,
            lease: None,
            key_secret: None,
            ban: None,
            name: String::new(),
            live: false,
            conn: None,
            lease_slots: DEFAULT_LEASES,
        }
    }

    /// The algorithm (the first limit's, with
    /// [`and_limit`](RedisStoreBuilder::and_limit)).
    pub fn algorithm(&self) -> &AnyAlgorithm {
        &self.inner.parts[0].algorithm
    }

    /// Every limit's algorithm, in check order.
    pub fn algorithms(&self) -> impl ExactSizeIterator<Item = &AnyAlgorithm> {
        self.inner.parts.iter().map(|p| &p.algorithm)
    }

    /// The circuit breaker's current state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Where its decisions come from now: Redis while the breaker is
    /// closed, else the in-memory fallback if it has one, else none.
    pub fn state(&self) -> StoreState {
        match (self.breaker_state(), self.inner.fallback.is_some()) {
            (BreakerState::Closed, _) => StoreState::Redis,
            (_, true) => StoreState::Fallback,
            (_, false) => StoreState::Down,
        }
    }

    /// The Redis key holding `key`'s state (for the first limit; see
    /// [`redis_keys`](Self::redis_keys)).
    pub fn redis_key(&self, key: &str) -> String {
        self.inner.redis_key(key, &self.inner.parts[0])
    }

    /// The Redis keys holding `key`'s state, one per limit, in check order.
    pub fn redis_keys(&self, key: &str) -> Vec<String> {
        self.inner
            .parts
            .iter()
            .map(|p| self.inner.redis_key(key, p))
            .collect()
    }

    /// The SHA1 of the store's script (what `EVALSHA` is called with).
    pub fn script_hash(&self) -> &str {
        self.inner.script.script.get_hash()
    }

    /// The script's arguments for a check of `key` at `now` (`None`: the
    /// server's time), as `EVALSHA hash n KEYS[1..n] ARGV...` takes them,
    /// with `n` the number of limits plus one, the ban key (2 unless
    /// [`and_limit`](RedisStoreBuilder::and_limit)); for benchmarks and
    /// debugging with other clients.
    pub fn script_args(&self, key: &str, cost: u64, now: Option<u64>) -> Vec<String> {
        let mut args = self.redis_keys(key);
        args.push(self.inner.ban_key(key));
        let call = self.inner.args(key, cost, now, None);
        args.extend(
            call.to_redis_args()
                .into_iter()
                .map(|a| String::from_utf8_lossy(&a).into_owned()),
        );
        args
    }

    /// Waits for the connection (building starts it, on a tokio runtime;
    /// the first one up to the connect timeout) and checks that Redis
    /// answers a `PING` within the store's timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let (mut c, _) = inner
            .conn
            .get(inner.timeout)
            .await
            .map_err(|f| f.to_store_error())?;
        let ping = redis::cmd("PING");
        let work = ping.query_async::<()>(&mut c);
        tokio::time::timeout(inner.timeout, work)
            .await
            .map_err(|_| {
                Failure::new(
                    Kind::Timeout,
                    format!("no answer within {:?}", inner.timeout),
                )
                .to_store_error()
            })?
            .map_err(|e| Failure::redis(&e).to_store_error())
    }

    /// The Redis key a key marked secret ([`StableKey::is_secret`]) gets
    /// for the first limit: its keyed hash in place of its text; `None`
    /// until the store knows its key secret (from the builder, or read
    /// from Redis at connect).
    pub fn secret_redis_key(&self, key: &str) -> Option<String> {
        let name = self.inner.name(key.to_owned(), true).ok()?;
        Some(self.inner.redis_key(&name, &self.inner.parts[0]))
    }

    /// Writes the cached key secret back to Redis if it is gone (`SET
    /// NX`) and reads it again, adopting what Redis holds; what
    /// [`Store::maintain`] does every [`KEY_SECRET_SYNC`]. Nothing to do
    /// with a secret from the builder.
    pub async fn sync_key_secret(&self) -> Result<(), StoreError> {
        self.inner
            .conn
            .sync_secret(self.inner.timeout)
            .await
            .map_err(|f| f.to_store_error())
    }

    /// Gives every lease's unspent units back to Redis and waits for it
    /// (see [`RedisStoreBuilder::lease`]); for a graceful shutdown.
    pub async fn release_leases(&self) {
        let Some(leases) = &self.inner.leases else {
            return;
        };
        for u in leases.drain_expired(u64::MAX) {
            let now = self.inner.caller_now(&u);
            let _ = self.inner.refund(u.key, u.units, u.taken_at, now).await;
        }
    }

    /// Whether `other` is this store (a clone of it).
    #[cfg(feature = "live")]
    pub(crate) fn is(&self, other: &RedisStore) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The connection, for another store to share.
    #[cfg(feature = "live")]
    pub(crate) fn conn(&self) -> Arc<Conn> {
        Arc::clone(&self.inner.conn)
    }

    /// Takes every lease's unspent units out of this store (a live
    /// store's old version), with the caller's time now, for another
    /// store to give back.
    #[cfg(feature = "live")]
    pub(crate) fn take_leases(&self) -> Vec<(Unspent, u64)> {
        let Some(leases) = &self.inner.leases else {
            return Vec::new();
        };
        leases
            .drain_expired(u64::MAX)
            .into_iter()
            .map(|u| {
                let now = self.inner.caller_now(&u);
                (u, now)
            })
            .collect()
    }

    /// Gives `unspent` back to Redis through this store, in tasks (see
    /// [`take_leases`](Self::take_leases)).
    #[cfg(feature = "live")]
    pub(crate) fn give_back(&self, unspent: Vec<(Unspent, u64)>) {
        for (u, now) in unspent {
            self.inner.give_back(Some(u), now);
        }
    }

    fn render<K: fmt::Display + ?Sized>(key: &K) -> String {
        key.to_string()
    }
}

impl Inner {
    fn redis_key(&self, key: &str, part: &Part) -> String {
        format!("{}{{{key}}}:{}", self.prefix, part.plan.tag)
    }

    /// The Redis key of `key`'s ban (in the slot of its states).
    fn ban_key(&self, key: &str) -> String {
        format!("{}{{{key}}}:ban", self.prefix)
    }

    /// The name a key goes by in this store (its deny cache, leases,
    /// fallback and Redis key): its text, or for a secret key the keyed
    /// hash of it; `Err(text)` while the secret is not known yet.
    fn name(&self, text: String, secret: bool) -> Result<String, String> {
        if !secret {
            return Ok(text);
        }
        match self.conn.secret.get() {
            Some(s) => Ok(hashed(&s, &text)),
            None => Err(text),
        }
    }

    /// The name of a secret key, once the first connect has read the
    /// secret; else the failure policy applies to the call (the fallback
    /// then counts the key under its text, in memory only).
    async fn name_later(&self, text: String) -> Result<String, (Failure, String)> {
        // Under the breaker: no connect attempt per call while it is open,
        // and failing to connect counts like any failure.
        let Some(permit) = self.breaker.admit() else {
            let failure = Failure::new(Kind::BreakerOpen, "circuit breaker open");
            return Err((failure, text));
        };
        let waited = self.conn.get(self.timeout).await;
        let named = self.name(text, true).map_err(|text| {
            let failure = waited
                .err()
                .unwrap_or_else(|| Failure::new(Kind::Other, "no key secret read from redis yet"));
            (failure, text)
        });
        let outcome = match &named {
            Ok(_) => Outcome::Answered,
            Err(_) => Outcome::Failed,
        };
        if permit.settle(outcome) {
            self.conn.refresh();
        }
        named
    }

    /// The script's arguments for a call on `key` (see
    /// [`CallArgs`]): written straight into the command, numbers as
    /// numbers.
    fn args<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
        now: Option<u64>,
        refund: Option<(u64, u64)>,
    ) -> CallArgs<impl Iterator<Item = (&'a Params, Option<u64>)> + Clone + 'a> {
        let op = if refund.is_some() {
            OpArg::Refund
        } else {
            OpArg::Check
        };
        self.args_op(key, cost, now, refund, op)
    }

    /// [`args`](Self::args) for `op`.
    fn args_op<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
        now: Option<u64>,
        refund: Option<(u64, u64)>,
        op: OpArg,
    ) -> CallArgs<impl Iterator<Item = (&'a Params, Option<u64>)> + Clone + 'a> {
        let (refund_s, refund_ns) = match (refund, now) {
            (Some((admitted_at, _)), Some(_)) => (
                Some(admitted_at / NANOS_PER_SEC),
                Some(admitted_at % NANOS_PER_SEC),
            ),
            (Some((admitted_at, caller_now)), None) => (
                Some(caller_now.saturating_sub(admitted_at).min(MAX_AGE)),
                None,
            ),
            (None, _) => (None, None),
        };
        CallArgs {
            common: CommonArgs {
                op,
                cost,
                now_s: now.map(|t| t / NANOS_PER_SEC),
                now_ns: now.map(|t| t % NANOS_PER_SEC),
                refund_s,
                refund_ns,
                ttl_slack_ms: TTL_SLACK_MS,
            },
            limits: self
                .parts
                .iter()
                .map(move |p| (&p.plan.params, key_phase(&p.algorithm, key))),
            multi: self.parts.len() > 1,
            ban: self.ban,
        }
    }

    /// One round trip on `conn`: the script on `key`'s state.
    async fn call(
        &self,
        (mut conn, generation): (Handle, u64),
        key: &str,
        cost: u64,
        now: u64,
        op: &Op,
    ) -> Result<Vec<i64>, Failure> {
        let time = match self.time {
            TimeSource::Redis => None,
            TimeSource::Caller => Some(now),
        };
        let (refund, op_arg) = match op {
            Op::Check => (None, OpArg::Check),
            Op::Refund { admitted_at } => (Some((*admitted_at, now)), OpArg::Refund),
            Op::Ban => (None, OpArg::Ban),
            Op::Settle { up: true, .. } => (None, OpArg::SettleUp),
            Op::Settle { admitted_at, .. } => (Some((*admitted_at, now)), OpArg::SettleDown),
        };
        let mut invocation = self.script.script.prepare_invoke();
        for part in &*self.parts {
            invocation.key(self.redis_key(key, part));
        }
        invocation.key(self.ban_key(key));
        invocation.arg(self.args_op(key, cost, time, refund, op_arg));
        match invocation.invoke_async::<Vec<i64>>(&mut conn).await {
            Ok(v) if self.well_formed(&v, op_arg) => Ok(v),
            Ok(v) => Err(Failure::new(
                Kind::Reply,
                format!(
                    "unexpected script reply of {} numbers, starting {:?}",
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

    /// Runs `op` under the breaker and the timeout. The timeout runs from
    /// when the connection is in hand (with the script loaded on it), so
    /// it measures Redis's answer: waiting for the store's first
    /// connection or a script's first load is not charged to it.
    async fn guarded(&self, key: &str, cost: u64, now: u64, op: Op) -> Result<Vec<i64>, Failure> {
        let Some(permit) = self.breaker.admit() else {
            return Err(Failure::new(Kind::BreakerOpen, "circuit breaker open"));
        };
        let result = match self.conn.ready(&self.script, self.timeout).await {
            Ok(conn) => {
                let call = self.call(conn, key, cost, now, &op);
                #[cfg(feature = "metrics")]
                let started = std::time::Instant::now();
                let result = match tokio::time::timeout(self.timeout, call).await {
                    Ok(r) => r,
                    Err(_) => Err(Failure::new(
                        Kind::Timeout,
                        format!("no answer within {:?}", self.timeout),
                    )),
                };
                #[cfg(feature = "metrics")]
                metrics::histogram!("ratelimit_store_duration_seconds", "store" => "redis", "limit" => self.label)
                    .record(started.elapsed().as_secs_f64());
                result
            }
            Err(failure) => Err(failure),
        };
        // Anything but a decision counts against Redis: an error reply
        // (OOM, NOPERM, READONLY, a foreign value at the key, ...) as much
        // as a timeout. A slow answer within the timeout is a decision.
        let outcome = match &result {
            Ok(_) => Outcome::Answered,
            Err(_) => Outcome::Failed,
        };
        if permit.settle(outcome) {
            // Opened: a fresh connection is made in the background, for
            // the probe; the current one serves until it is ready.
            self.conn.refresh();
        }
        result
    }

    /// A script's reply: four numbers per limit run, every limit but the
    /// last admitting, and no more than the store's limits; all of them
    /// unless one denied.
    fn well_formed(&self, v: &[i64], op: OpArg) -> bool {
        match op {
            OpArg::Check => {}
            OpArg::Refund | OpArg::Ban => return v.len() == 4 && (v[0] == 0 || v[0] == 1),
            // Five numbers for every limit, each admitting or in debt.
            OpArg::SettleUp | OpArg::SettleDown => {
                return v.len() == 5 * self.parts.len()
                    && v.chunks(5).all(|r| r[0] == 0 || r[0] == 1)
            }
        }
        if v.len() == 5 && v[0] == 2 {
            return true; // banned
        }
        let runs = v.len() / 5;
        let flag = |i: usize| v[5 * i];
        v.len() % 5 == 0
            && (1..=self.parts.len()).contains(&runs)
            && (0..runs - 1).all(|i| flag(i) == 1)
            && (flag(runs - 1) == 1 || flag(runs - 1) == 0)
            && (runs == self.parts.len() || flag(runs - 1) == 0)
    }

    /// The decision of a well-formed reply, and the limit it comes from
    /// when denied (the last limit run).
    fn decision(&self, v: &[i64]) -> (Decision, usize) {
        let nanos = |x: i64| Duration::from_nanos(u64::try_from(x).unwrap_or(0));
        if v[0] == 2 {
            let a = &self.parts[0].algorithm;
            return (Decision::ban(a.limit(), a.window(), nanos(v[2])), 0);
        }
        let one = |i: usize| self.part_decision(v, i);
        let last = v.len() / 5 - 1;
        let d = one(last);
        if !d.allowed || last == 0 {
            return (d, last);
        }
        (combine((0..=last).map(one).collect()), last)
    }

    /// Limit `i`'s decision in a reply: five numbers per limit, allowed,
    /// remaining, wait, reset, and the wait for one more unit.
    fn part_decision(&self, v: &[i64], i: usize) -> Decision {
        let nanos = |x: i64| Duration::from_nanos(u64::try_from(x).unwrap_or(0));
        let (v, a) = (&v[5 * i..5 * i + 5], &self.parts[i].algorithm);
        Decision::new(
            v[0] == 1,
            u64::try_from(v[1]).unwrap_or(0),
            (v[2] >= 0).then(|| nanos(v[2])),
            a.limit(),
            a.window(),
            nanos(v[3]),
            nanos(v[4]),
        )
    }

    /// The deny cache's time: the caller's `now` with
    /// [`TimeSource::Caller`], else the local monotonic clock (its rate,
    /// not its origin, matters: a denial's wait is counted from it).
    fn local_now(&self, now: u64) -> u64 {
        match self.time {
            TimeSource::Caller => now,
            TimeSource::Redis => {
                u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
        }
    }

    async fn check(
        self: &Arc<Self>,
        key: String,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        // Only cost-1 denials are cached: their `remaining` is 0 and stays
        // 0 until the wait ends, so the cached answer is the exact one. A
        // peek (cost 0) is always admitted and reports a `remaining` that
        // moves; a cost-n denial's `remaining` grows while it stands.
        let deny = self.deny.as_ref().filter(|_| cost == 1);
        // Read before the call: Redis decides after it, so the wait is
        // counted down from no later than the real denial.
        // (The deny cache was looked up by `Store::check`, see `cached`.)
        let local = self.local_now(now);
        if let Some(leases) = self.leases.as_ref().filter(|_| cost == 1) {
            let (spend, expired) = leases.spend(&key, local);
            if let Some(u) = expired {
                // Back before the next lease is taken, so that it counts.
                let _ = self.refund(u.key, u.units, u.taken_at, now).await;
            }
            match spend {
                Spend::Spent(d) => return Ok(d),
                Spend::Hot => {}
                Spend::Cold => return self.decide(key, cost, now, local, deny).await,
            }
            // A lease of `size`; when fewer are left, a lease of what is
            // left (`remaining`, if 2 or more), else an ordinary check.
            let mut size = leases.size;
            while size >= 2 {
                match self.guarded(&key, size, now, Op::Check).await {
                    Ok(v) => {
                        let (d, _) = self.decision(&v);
                        if d.allowed {
                            let left = size - 1;
                            let replaced = leases.insert(&key, left, now, local, &d);
                            self.give_back(replaced, now);
                            let mut d = d;
                            d.remaining = d.remaining.saturating_add(left);
                            if d.remaining > 0 {
                                d.next = Duration::ZERO;
                            }
                            return Ok(d);
                        }
                        size = if d.remaining < size { d.remaining } else { 0 };
                    }
                    Err(failure) => return self.failed(&failure, &key, cost, now),
                }
            }
        }
        self.decide(key, cost, now, local, deny).await
    }

    /// An ordinary check in Redis, its denial remembered in `deny`.
    async fn decide(
        &self,
        key: String,
        cost: u64,
        now: u64,
        local: u64,
        deny: Option<&DenyCache>,
    ) -> Result<Decision, StoreError> {
        match self.guarded(&key, cost, now, Op::Check).await {
            Ok(v) => {
                let (d, part) = self.decision(&v);
                if let Some(cache) = deny.filter(|_| !d.allowed) {
                    cache.remember(&key, local, &d, part);
                }
                Ok(d)
            }
            Err(failure) => self.failed(&failure, &key, cost, now),
        }
    }

    /// The deny cache's answer to a check, if it has one (see `check`).
    fn cached(&self, key: &str, cost: u64, now: u64) -> Option<Decision> {
        let cache = self.deny.as_ref().filter(|_| cost == 1)?;
        let constants = |i: usize| {
            let a = &self.parts[i].algorithm;
            (a.limit(), a.window())
        };
        let d = cache.denied(key, self.local_now(now), constants)?;
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_deny_cache_hits_total", "limit" => self.label)
            .increment(1);
        Some(d)
    }

    /// The failure policy for a check Redis did not decide.
    fn failed(
        &self,
        failure: &Failure,
        key: &str,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => {
                #[cfg(feature = "metrics")]
                metrics::counter!("ratelimit_redis_fallback_total", "limit" => self.label)
                    .increment(1);
                memory.check(key, cost, now)
            }
            None => Err(failure.to_store_error()),
        }
    }

    /// Gives a lease's unspent units back, in a task of its own (outside
    /// a tokio runtime, they stay taken until the key's state refills).
    fn give_back(self: &Arc<Self>, unspent: Option<Unspent>, now: u64) {
        let Some(u) = unspent else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "ratelimit_redis", units = u.units, "no tokio runtime: lease units not given back");
            return;
        };
        let inner = Arc::clone(self);
        runtime.spawn(async move {
            let _ = inner.refund(u.key, u.units, u.taken_at, now).await;
        });
    }

    /// The caller's time now, estimated for a lease's refund when no
    /// caller is at hand: its take's time plus the local time since.
    fn caller_now(&self, u: &Unspent) -> u64 {
        match self.time {
            TimeSource::Caller => u.taken_at,
            TimeSource::Redis => u
                .taken_at
                .saturating_add(self.local_now(0).saturating_sub(u.taken_local)),
        }
    }

    async fn refund(
        &self,
        key: String,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
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
            Err(failure) => self.refund_failed(&failure, &key, cost, admitted_at, now),
        }
    }

    /// The failure policy for a refund Redis did not take.
    fn refund_failed(
        &self,
        failure: &Failure,
        key: &str,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => {
                memory.refund(key, cost, admitted_at, now);
                Ok(())
            }
            None => Err(failure.to_store_error()),
        }
    }

    /// Settles `key` (see [`Store::settle`]) in one script: up charges
    /// `actual - reserved` whatever is left, down refunds `reserved -
    /// actual`. The key's remembered denial is forgotten and its lease
    /// given back first, so that its next checks see the settled state; a
    /// key left in debt is remembered in the deny cache as a cost-1
    /// check's denial (its wait is the peek's `next`).
    async fn settle(
        &self,
        key: String,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
        if let Some(u) = self.leases.as_ref().and_then(|l| l.take_key(&key)) {
            let _ = self.refund(u.key, u.units, u.taken_at, now).await;
        }
        if self.breaker.state() == BreakerState::Open {
            if let Some(memory) = &self.fallback {
                return memory.settle(&key, reserved, actual, admitted_at, now);
            }
        }
        let up = actual >= reserved;
        let cost = actual.abs_diff(reserved);
        let local = self.local_now(now);
        match self
            .guarded(&key, cost, now, Op::Settle { admitted_at, up })
            .await
        {
            Ok(v) => {
                let parts = (0..v.len() / 5).map(|i| self.part_decision(&v, i));
                let (d, part) = settled(parts.collect());
                if let Some(cache) = self.deny.as_ref().filter(|_| !d.allowed) {
                    let denial =
                        Decision::new(false, 0, Some(d.next), d.limit, d.window, d.reset, d.next);
                    cache.remember(&key, local, &denial, part);
                }
                Ok(d)
            }
            Err(failure) => self.settle_failed(&failure, &key, reserved, actual, admitted_at, now),
        }
    }

    /// The failure policy for a settlement Redis did not take.
    fn settle_failed(
        &self,
        failure: &Failure,
        key: &str,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => memory.settle(key, reserved, actual, admitted_at, now),
            None => Err(failure.to_store_error()),
        }
    }

    /// The name of the key `text` (see [`name`](Self::name)), waiting for
    /// the key secret if needed; else the error and the text.
    async fn named(&self, text: String, secret: bool) -> Result<String, (StoreError, String)> {
        self.resolved(text, secret)
            .await
            .map_err(|(failure, text)| (failure.to_store_error(), text))
    }

    /// As [`named`](Self::named), with the failure itself (for the
    /// failure policy of a refund or a settlement).
    async fn resolved(&self, text: String, secret: bool) -> Result<String, (Failure, String)> {
        match self.name(text, secret) {
            Ok(name) => Ok(name),
            Err(text) => self.name_later(text).await,
        }
    }

    /// Forgets `name`'s state: its entries in the deny cache, the leases
    /// and the fallback, then its Redis keys (one per limit, and the ban
    /// key), deleted in one `DEL` (they share a hash slot).
    async fn reset(&self, name: String) -> Result<(), StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&name);
        }
        if let Some(leases) = &self.leases {
            leases.forget(&name);
        }
        if let Some(memory) = &self.fallback {
            memory.reset(&name);
        }
        let keys: Vec<String> = self
            .parts
            .iter()
            .map(|p| self.redis_key(&name, p))
            .collect();
        let mut del = redis::cmd("DEL");
        del.arg(keys);
        self.command(del).await?;
        self.publish(Change::Reset, &name).await;
        Ok(())
    }

    /// Bans `name` for `ms` from now (Redis's time, or the caller's
    /// `now`), forgetting its deny-cache entry and lease here; in the
    /// fallback too.
    async fn ban(&self, name: String, ms: u64, now: u64) -> Result<(), StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&name);
        }
        if let Some(leases) = &self.leases {
            leases.forget(&name);
        }
        if let Some(memory) = &self.fallback {
            memory.ban(&name, Duration::from_millis(ms), now);
        }
        match self.guarded(&name, ms, now, Op::Ban).await {
            Ok(_) => {
                self.publish(Change::Ban { ms }, &name).await;
                Ok(())
            }
            Err(failure) => {
                self.report(&failure);
                Err(failure.to_store_error())
            }
        }
    }

    /// Lifts `name`'s ban: its ban key deleted, its deny-cache entry here
    /// forgotten; in the fallback too.
    async fn unban(&self, name: String) -> Result<(), StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&name);
        }
        if let Some(memory) = &self.fallback {
            memory.unban(&name);
        }
        let mut del = redis::cmd("DEL");
        del.arg(self.ban_key(&name));
        self.command(del).await?;
        self.publish(Change::Unban, &name).await;
        Ok(())
    }

    /// What is left of `name`'s ban at `now` (the caller's time with
    /// [`TimeSource::Caller`], else Redis's), read with its time in one
    /// round trip.
    async fn ban_left(&self, name: String, now: u64) -> Result<Option<Duration>, StoreError> {
        let (mut c, _) = self
            .conn
            .get(self.timeout)
            .await
            .map_err(|f| f.to_store_error())?;
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(self.ban_key(&name))
            .arg("us")
            .arg("un");
        pipe.cmd("TIME");
        let work = pipe.query_async::<(Vec<Option<String>>, (String, String))>(&mut c);
        let (until, (s, us)) = match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(Failure::redis(&e).to_store_error()),
            Err(_) => {
                return Err(Failure::new(
                    Kind::Timeout,
                    format!("no answer within {:?}", self.timeout),
                )
                .to_store_error())
            }
        };
        let num = |t: &str| t.trim().parse::<f64>().map_or(0, |f| f.max(0.0) as u128);
        let now = match self.time {
            TimeSource::Caller => u128::from(now),
            TimeSource::Redis => num(&s) * 1_000_000_000 + num(&us) * 1_000,
        };
        let [Some(until_s), Some(until_ns)] = until.as_slice() else {
            return Ok(None);
        };
        let until = num(until_s) * 1_000_000_000 + num(until_ns);
        Ok((until > now)
            .then(|| Duration::from_nanos(u64::try_from(until - now).unwrap_or(u64::MAX))))
    }

    /// One command other than the script, within the store's timeout.
    async fn command(&self, cmd: redis::Cmd) -> Result<(), StoreError> {
        let (mut c, _) = self
            .conn
            .get(self.timeout)
            .await
            .map_err(|f| f.to_store_error())?;
        let work = cmd.query_async::<()>(&mut c);
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::redis(&e).to_store_error()),
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no answer within {:?}", self.timeout),
            )
            .to_store_error()),
        }
    }

    /// Counts a failure (`ratelimit_redis_errors_total{kind}`) and warns of
    /// it, a few lines a minute per kind at most, each with the number of
    /// failures of its kind not logged since the previous line. Calls
    /// skipped by the open breaker are counted, not logged: the breaker
    /// logs its opening. The key is not logged: it may be a client's API
    /// key or token.
    fn report(&self, failure: &Failure) {
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_errors_total", "limit" => self.label, "kind" => failure.kind.as_str())
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
                error = %failure.source,
                suppressed,
                fallback = self.fallback.is_some(),
                "redis gave no decision; the failure policy applies (in-memory fallback, or an error)"
            );
        }
    }
}

impl Inner {
    /// Tells every store sharing the Redis and prefix of `change` to
    /// `name` (see `invalidation`).
    async fn publish(&self, change: Change, name: &str) {
        invalidation::publish(&self.conn, &self.prefix, change, name, self.timeout).await;
    }
}

impl Listener for Inner {
    /// Another store's change of `name`: its cached denial and lease
    /// forgotten here, a ban remembered as a standing denial (on the
    /// local clock; with [`TimeSource::Caller`] the caller's clock is not
    /// at hand, and the next check asks Redis).
    fn apply(&self, change: Change, name: &str) {
        if let Some(cache) = &self.deny {
            cache.forget(name);
        }
        match change {
            Change::Reset => {
                if let Some(leases) = &self.leases {
                    leases.forget(name);
                }
                if let Some(memory) = &self.fallback {
                    memory.reset(name);
                }
            }
            Change::Unban => {
                if let Some(memory) = &self.fallback {
                    memory.unban(name);
                }
            }
            Change::Ban { ms } => {
                if let Some(leases) = &self.leases {
                    leases.forget(name);
                }
                let cache = self
                    .deny
                    .as_ref()
                    .filter(|_| self.time == TimeSource::Redis);
                if let Some(cache) = cache {
                    let a = &self.parts[0].algorithm;
                    let ban = Decision::ban(a.limit(), a.window(), Duration::from_millis(ms));
                    cache.remember(name, self.local_now(0), &ban, 0);
                }
            }
        }
    }
}

impl Drop for Inner {
    /// Gives the leases' unspent units back, in a task on the current
    /// tokio runtime (none: they stay taken until the keys' states refill).
    fn drop(&mut self) {
        let Some(leases) = &self.leases else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for u in leases.drain_expired(u64::MAX) {
            let now = self.caller_now(&u);
            let time = (self.time == TimeSource::Caller).then_some(now);
            let mut keys: Vec<String> = self
                .parts
                .iter()
                .map(|p| self.redis_key(&u.key, p))
                .collect();
            keys.push(self.ban_key(&u.key));
            let args = self
                .args(&u.key, u.units, time, Some((u.taken_at, now)))
                .to_redis_args();
            let (conn, script, timeout) = (
                Arc::clone(&self.conn),
                Arc::clone(&self.script),
                self.timeout,
            );
            runtime.spawn(async move {
                let work = async {
                    let (mut c, _) = conn.get(timeout).await.ok()?;
                    let mut invocation = script.script.prepare_invoke();
                    for k in keys {
                        invocation.key(k);
                    }
                    invocation.arg(args);
                    invocation.invoke_async::<Vec<i64>>(&mut c).await.ok()
                };
                let _ = tokio::time::timeout(timeout, work).await;
            });
        }
    }
}

/// The future of a [`RedisStore`] check: ready at once when the deny
/// cache answers, else a round trip.
pub struct CheckFuture(CheckState);

enum CheckState {
    Ready(Option<Result<Decision, StoreError>>),
    Pending(StoreFuture<Decision>),
}

impl Future for CheckFuture {
    type Output = Result<Decision, StoreError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match &mut self.0 {
            CheckState::Ready(answer) => {
                std::task::Poll::Ready(answer.take().unwrap_or_else(|| {
                    Err(StoreError::unavailable(
                        "other",
                        "check polled after completion",
                    ))
                }))
            }
            CheckState::Pending(f) => f.as_mut().poll(cx),
        }
    }
}

impl fmt::Debug for CheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            CheckState::Ready(_) => "CheckFuture(ready)",
            CheckState::Pending(_) => "CheckFuture(pending)",
        })
    }
}

/// The future of a [`RedisStore`] call.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

impl<K> Store<K> for RedisStore
where
    K: fmt::Display + StableKey + Send + Sync + ?Sized,
{
    type CheckFuture = CheckFuture;
    type RefundFuture = StoreFuture<()>;

    /// Decides in Redis (see [`TimeSource`] for what `now` is used for),
    /// or at once from the deny cache. A key marked secret
    /// ([`StableKey::is_secret`]) goes by its keyed hash.
    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture {
        let inner = Arc::clone(&self.inner);
        let key = match inner.name(Self::render(key), key.is_secret()) {
            Ok(name) => name,
            Err(text) => {
                return CheckFuture(CheckState::Pending(Box::pin(async move {
                    match inner.name_later(text).await {
                        Ok(name) => inner.check(name, cost, now).await,
                        Err((failure, text)) => inner.failed(&failure, &text, cost, now),
                    }
                })))
            }
        };
        if let Some(d) = inner.cached(&key, cost, now) {
            return CheckFuture(CheckState::Ready(Some(Ok(d))));
        }
        CheckFuture(CheckState::Pending(Box::pin(async move {
            inner.check(key, cost, now).await
        })))
    }

    /// Gives back `cost` admitted at `admitted_at` (the caller's clock,
    /// like `now`).
    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Box::pin(async move {
            match inner.resolved(text, secret).await {
                Ok(name) => inner.refund(name, cost, admitted_at, now).await,
                Err((failure, text)) => {
                    inner.refund_failed(&failure, &text, cost, admitted_at, now)
                }
            }
        })
    }

    /// Settles in Redis, in one script over every limit (see
    /// [`Store::settle`]); the fallback's memory stores while Redis fails.
    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> SettleFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Box::pin(async move {
            match inner.resolved(text, secret).await {
                Ok(name) => inner.settle(name, reserved, actual, admitted_at, now).await,
                Err((failure, text)) => {
                    inner.settle_failed(&failure, &text, reserved, actual, admitted_at, now)
                }
            }
        })
    }

    /// Deletes the key's state in Redis (every limit's key; a secret key's
    /// keyed-hash name), and forgets it in the deny cache, the leases and
    /// the fallback.
    fn reset(&self, key: &K) -> AdminFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Box::pin(async move {
            match inner.named(text, secret).await {
                Ok(name) => inner.reset(name).await,
                Err((e, text)) => {
                    if let Some(memory) = &inner.fallback {
                        memory.reset(&text);
                    }
                    Err(e)
                }
            }
        })
    }

    /// Bans the key in Redis for `duration` (at least 1 ms, in whole ms)
    /// from now: Redis's time, or `now` with [`TimeSource::Caller`].
    fn ban(&self, key: &K, duration: Duration, now: u64) -> AdminFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        let ms = u64::try_from(duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.ban(name, ms, now).await
        })
    }

    /// What is left of the key's ban in Redis, if it is banned.
    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.ban_left(name, now).await
        })
    }

    /// Lifts the key's ban in Redis (what it used stays used).
    fn unban(&self, key: &K) -> AdminFuture {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.unban(name).await
        })
    }

    /// Bounded upkeep of the in-memory fallback, if any (see
    /// [`MemoryStore::maintain`]): the keys it took during an outage are
    /// dropped once full, and its memory given back. With leases, the
    /// unspent units of expired leases are given back (in tasks). Every
    /// [`KEY_SECRET_SYNC`], the shared key secret is written back if
    /// Redis lost it, and read (in a task; see
    /// [`sync_key_secret`](RedisStore::sync_key_secret)).
    fn maintain(&self, now: u64) {
        if let Some(leases) = &self.inner.leases {
            for u in leases.drain_expired(self.inner.local_now(now)) {
                self.inner.give_back(Some(u), now);
            }
        }
        if let Some(fallback) = &self.inner.fallback {
            fallback.maintain(now);
        }
        if self.inner.conn.sync_due(KEY_SECRET_SYNC) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let store = self.clone();
                runtime.spawn(async move {
                    let _ = store.sync_key_secret().await;
                });
            }
        }
    }

    /// The in-memory fallback's keys and evictions, if it has one.
    fn counts(&self) -> Option<StoreCounts> {
        self.inner.fallback.as_ref().map(Fallback::counts)
    }
}

/// `src` without its whole-line comments: every byte of a script is sent
/// at each load, and Redis refuses a bulk of over 16 KiB before `AUTH`
/// (so a store without the password learns `NOAUTH`, not a protocol
/// error). The scripts have no block comments and no multi-line strings.
fn without_comments(src: &str) -> String {
    src.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `name` for the life of the program (metrics labels are `'static`),
/// each distinct name leaked once however many stores carry it.
fn interned(name: String) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{OnceLock, PoisonError};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}
