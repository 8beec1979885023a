//! The builder of a [`RedisStore`]: its settings, their checks, and the
//! store they make.

use crate::connect::conn::Conn;
use crate::connect::target::Target;
use crate::connect::time_source::TimeSource;
use crate::fleet::deny_cache::DenyCache;
use crate::fleet::key_secret::{SecretSource, SECRET_SUFFIX};
use crate::fleet::lease::Leases;
use crate::fleet::write_back_state::WriteBack;
use crate::inner::{Inner, RedisStore};
use crate::outage::breaker::{Breaker, BreakerConfig};
use crate::outage::fallback::{FailurePolicy, Fallback};
use crate::scripts::args::BanArgs;
use crate::scripts::plan::Plan;
use crate::scripts::script::{self, Part, Script};
use crate::RedisBuildError;
#[cfg(doc)]
use crate::{INSTANCE_ANNOUNCE_EVERY, INSTANCE_SEEN_WITHIN};
#[cfg(doc)]
use ratelimit_core::{algorithm::StableKey, Decision, Store};
use ratelimit_core::{Algorithm, AnyAlgorithm, BanPolicy};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The default per-call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "ratelimit:";
/// The default size of the local deny cache, in keys (see
/// [`RedisStoreBuilder::deny_cache`]).
pub const DEFAULT_DENY_CACHE: usize = 16_384;
/// The most keys holding a lease at once (see
/// [`RedisStoreBuilder::lease`]).
pub const DEFAULT_LEASES: usize = 4_096;
/// The most limits one store checks together.
pub const MAX_LIMITS: usize = 16;

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
///
/// ```
/// use ratelimit_core::Gcra;
/// use ratelimit_redis::{RedisStore, StoreState};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let gcra = Gcra::new(100, Duration::from_secs(60))?;
/// let store = RedisStore::builder("redis://127.0.0.1:6379/", gcra.clone())
///     .prefix("api:")
///     .timeout(Duration::from_millis(20))
///     .fallback_to_memory(10_000)
///     .build()?;
/// assert_eq!(store.state(), StoreState::Redis);
/// // A bad URL is an error that names it.
/// let err = RedisStore::builder("http://127.0.0.1/", gcra).build().unwrap_err();
/// assert!(err.to_string().contains("http://127.0.0.1/"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder<L = AnyAlgorithm> {
    target: Target,
    /// The limit: an algorithm, or the live settings a `LiveRedis` follows.
    pub(crate) limit: L,
    more: Vec<AnyAlgorithm>,
    prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    breaker: BreakerConfig,
    fallback: Option<usize>,
    outage_share: bool,
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
    /// The fallback memory shared with other stores (a live store's
    /// versions and overrides).
    #[cfg(feature = "live")]
    pub(crate) live_fallback: Option<Arc<crate::outage::live_fallback::LiveMemory>>,
}

impl<L> RedisStoreBuilder<L> {
    /// The defaults, for a store on `target` deciding with `limit` (see
    /// [`RedisStore::builder`](crate::RedisStore::builder) and
    /// `LiveRedis::builder`).
    pub(crate) fn new(target: Target, limit: L) -> Self {
        Self {
            target,
            limit,
            more: Vec::new(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            breaker: BreakerConfig::default(),
            fallback: None,
            outage_share: true,
            time: TimeSource::Redis,
            deny_cache: DEFAULT_DENY_CACHE,
            lease: None,
            key_secret: None,
            ban: None,
            name: String::new(),
            live: false,
            conn: None,
            lease_slots: DEFAULT_LEASES,
            #[cfg(feature = "live")]
            live_fallback: None,
        }
    }

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
    /// empty. `StoreSettings` sets it to the
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
    /// its own. See the crate docs for the table of failures. `0` fails
    /// at [`build`](Self::build).
    pub fn fallback_to_memory(mut self, max_keys: usize) -> Self {
        self.fallback = Some(max_keys);
        self
    }

    /// Whether the in-memory fallback admits only this instance's share of
    /// each limit while Redis gives no decision (default: `true`).
    ///
    /// With a fallback, every instance announces itself through Redis
    /// every [`INSTANCE_ANNOUNCE_EVERY`] (a sorted set at
    /// `{prefix}instances:{limits}` of random instance ids, scored by
    /// Redis's time, those not seen within [`INSTANCE_SEEN_WITHIN`]
    /// dropped) and remembers how many instances it saw, `k`. While Redis
    /// is away, a call of cost `c` then takes `min(c * k, C)` of a limit
    /// of capacity `C` in the fallback: each instance admits `floor(C /
    /// k)` (at least 1) at `1/k` of the rate, and the fleet about `C`
    /// together, where each admitting `C` would make `k * C`. See the
    /// crate docs, "When Redis fails", for the bound and its limits.
    /// `false`: each fallback admits the whole limit.
    ///
    /// ```
    /// use ratelimit_core::Gcra;
    /// use ratelimit_redis::RedisStore;
    /// use std::time::Duration;
    ///
    /// let store = RedisStore::builder("redis://127.0.0.1/", Gcra::new(10, Duration::from_secs(1))?)
    ///     .fallback_to_memory(10_000)
    ///     .outage_share(false)
    ///     .build()?;
    /// assert_eq!(store.instances(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn outage_share(mut self, on: bool) -> Self {
        self.outage_share = on;
        self
    }

    /// Where the time of a check comes from (default: the server's `TIME`).
    pub fn time_source(mut self, time: TimeSource) -> Self {
        self.time = time;
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
    /// keys) and, at [`maintain`](ratelimit_core::store::Upkeep::maintain), those of expired
    /// leases. [`release_leases`](RedisStore::release_leases) gives every
    /// lease back (at shutdown); dropping the store spawns the same on
    /// the current tokio runtime, if any. When not even 2 units are left,
    /// the check is an ordinary cost-1 check. `size` below 2 fails at
    /// [`build`](Self::build) (leave leases unset for none).
    ///
    /// Exactness: see the crate docs, "Leases". With `k` instances and
    /// leases of `n`, the limit can be exceeded by up to `k * (n - 1)`
    /// requests in a window, and units held unspent by idle instances are
    /// missing for up to `ttl`.
    pub fn lease(mut self, size: u64, ttl: Duration) -> Self {
        self.lease = Some((size, ttl));
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

    /// A live store's fallback memory, if the store falls back to memory:
    /// under `default`, of the store's size and ban.
    #[cfg(feature = "live")]
    pub(crate) fn live_memory(
        &self,
        default: AnyAlgorithm,
    ) -> Option<crate::outage::live_fallback::LiveMemory> {
        self.fallback
            .map(|max| crate::outage::live_fallback::LiveMemory::new(default, max, self.ban))
    }

    /// The same settings for `limit`.
    #[cfg(feature = "live")]
    pub(crate) fn with_limit<M>(self, limit: M) -> RedisStoreBuilder<M> {
        RedisStoreBuilder {
            target: self.target,
            limit,
            more: self.more,
            prefix: self.prefix,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            breaker: self.breaker,
            fallback: self.fallback,
            outage_share: self.outage_share,
            time: self.time,
            deny_cache: self.deny_cache,
            lease: self.lease,
            key_secret: self.key_secret,
            ban: self.ban,
            name: self.name,
            live: self.live,
            conn: self.conn,
            lease_slots: self.lease_slots,
            live_fallback: self.live_fallback,
        }
    }
}

impl RedisStoreBuilder {
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

    /// The same settings for `algorithm`.
    #[cfg(feature = "live")]
    pub(crate) fn with_algorithm(mut self, algorithm: AnyAlgorithm) -> Self {
        self.limit = algorithm;
        self
    }

    /// The store. It connects lazily, in the background, on first use: a
    /// service starts even while Redis is down.
    ///
    /// Fails on a bad URL, a prefix with braces, or an algorithm whose
    /// numbers exceed the range the scripts compute exactly in (periods up
    /// to 26 days for the windows; see the crate docs).
    pub fn build(self) -> Result<RedisStore, RedisBuildError> {
        self.check_settings()?;
        if self.prefix.contains(['{', '}']) {
            return Err(RedisBuildError::Prefix(self.prefix));
        }
        let backend = self.target.into_backend()?;
        let algorithms = std::iter::once(self.limit).chain(self.more).collect();
        let parts = parts(algorithms, self.time, self.live)?;
        let conn = self.conn.unwrap_or_else(|| {
            let secret = secret_source(self.key_secret, &self.prefix);
            Arc::new(Conn::new(backend, self.connect_timeout, secret))
        });
        // Registered before connecting: the connect loads it.
        let slot = conn.register(&script::source(&parts));
        // Joined before connecting too (the connect starts announcing):
        // the stores deciding the same limits on the same keys.
        let roster = self.fallback.map(|_| {
            let tags: Vec<&str> = parts.iter().map(|p| p.plan.tag.as_str()).collect();
            conn.rosters
                .join(format!("{}instances:{}", self.prefix, tags.join(",")))
        });
        conn.start();
        let fallback = self.fallback.map(|max| {
            #[cfg(feature = "live")]
            if let Some(shared) = &self.live_fallback {
                return Fallback::live(parts[0].algorithm, Arc::clone(shared));
            }
            Fallback::new(parts.iter().map(|p| &p.algorithm), max, self.ban)
        });
        let fallback = fallback.map(|f| f.shared_by(roster.clone().filter(|_| self.outage_share)));
        let leases = leases(self.lease, &parts, self.lease_slots);
        let label = interned(self.name);
        let script = Script {
            conn: Arc::clone(&conn),
            slot,
            parts: parts.into(),
            prefix: self.prefix,
            time: self.time,
            ban: BanArgs::of(self.ban.as_ref()),
        };
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                roster,
                script: Arc::new(script),
                timeout: self.timeout,
                breaker: Breaker::labelled(self.breaker, label),
                label,
                policy: FailurePolicy::new(fallback, label),
                deny: (self.deny_cache > 0).then(|| DenyCache::new(self.deny_cache)),
                leases,
                origin: tokio::time::Instant::now(),
                write_back: WriteBack::new(),
            }),
        };
        store.join_invalidation();
        Ok(store)
    }
}

impl<L> RedisStoreBuilder<L> {
    /// Refuses a setting the store cannot honour, naming it and its value:
    /// a fallback of 0 keys, a lease of fewer than 2 units.
    pub(crate) fn check_settings(&self) -> Result<(), RedisBuildError> {
        if self.fallback == Some(0) {
            return Err(RedisBuildError::Setting(
                "fallback_to_memory(0): the fallback holds at least 1 key".to_owned(),
            ));
        }
        if let Some((size, _)) = self.lease.filter(|&(size, _)| size < 2) {
            return Err(RedisBuildError::Setting(format!(
                "lease size {size}: a lease takes at least 2 units (leave leases unset for none)"
            )));
        }
        Ok(())
    }
}

/// The limits of a store, each with its plan; refused when more than
/// [`MAX_LIMITS`], when one cannot run exactly in Redis, or when one comes
/// twice.
fn parts(
    algorithms: Vec<AnyAlgorithm>,
    time: TimeSource,
    live: bool,
) -> Result<Vec<Part>, RedisBuildError> {
    if algorithms.len() > MAX_LIMITS {
        return Err(RedisBuildError::Unsupported(format!(
            "{} limits in one store (at most {MAX_LIMITS})",
            algorithms.len()
        )));
    }
    let mut parts: Vec<Part> = Vec::with_capacity(algorithms.len());
    for algorithm in algorithms {
        let mut plan = Plan::new(&algorithm, time == TimeSource::Caller)?;
        if live {
            plan = plan.live(&algorithm);
        }
        if parts.iter().any(|p| p.plan.tag == plan.tag) {
            return Err(RedisBuildError::Unsupported(format!(
                "the same limit twice in one store ({algorithm})"
            )));
        }
        parts.push(Part { algorithm, plan });
    }
    Ok(parts)
}

/// Where the key secret comes from: the builder's, or the one shared
/// through Redis beside the store's keys.
fn secret_source(fixed: Option<[u8; 16]>, prefix: &str) -> SecretSource {
    match fixed {
        Some(bytes) => SecretSource::Fixed(bytes),
        None => SecretSource::Shared(format!("{prefix}{SECRET_SUFFIX}")),
    }
}

/// The lease table, if leases are on and one of 2 units or more fits in
/// every limit (a lease above the smallest capacity is never granted).
fn leases(lease: Option<(u64, Duration)>, parts: &[Part], slots: usize) -> Option<Leases> {
    let min_limit = parts.iter().map(|p| p.algorithm.limit()).min().unwrap_or(0);
    lease
        .map(|(size, ttl)| (size.min(min_limit), ttl))
        .filter(|&(size, _)| size >= 2)
        .map(|(size, ttl)| Leases::new(slots, size, ttl))
}

/// `name` for the life of the program (metrics labels are `'static`),
/// each distinct name leaked once however many stores carry it.
fn interned(name: String) -> &'static str {
    use std::collections::HashSet;
    use std::sync::OnceLock;
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

#[cfg(test)]
mod tests {
    use crate::{RedisBuildError, RedisStore};
    use ratelimit_core::Gcra;
    use std::time::Duration;

    /// A fallback of 0 keys and a lease of 1 unit fail at build, naming
    /// the setting and its value: neither is clamped in silence.
    #[test]
    fn settings_out_of_range_fail_at_build() {
        let gcra = Gcra::new(10, Duration::from_secs(1)).unwrap();
        let builder = || RedisStore::builder("redis://127.0.0.1:1/", gcra);
        let fail = |r: Result<RedisStore, RedisBuildError>| match r {
            Err(RedisBuildError::Setting(why)) => why,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("built"),
        };
        let zero = fail(builder().fallback_to_memory(0).build());
        assert!(zero.contains("fallback_to_memory(0)"), "{zero}");
        for size in [0, 1] {
            let lease = fail(builder().lease(size, Duration::from_secs(1)).build());
            assert!(lease.contains(&format!("lease size {size}")), "{lease}");
        }
    }
}
