//! A store chosen by settings: in memory, or in Redis with its failure
//! policy, behind one type.

#[cfg(feature = "live")]
use crate::LiveRedis;
use crate::{
    BreakerConfig, KeySecret, RedisBuildError, RedisStore, RedisStoreBuilder, StoreFuture, Target,
    DEFAULT_PREFIX, DEFAULT_TIMEOUT,
};
use ratelimit_core::algorithm::StableKey;
use ratelimit_core::store::{BanLeftFuture, SettleFuture, StoreCounts, Upkeep};
use ratelimit_core::BanPolicy;
#[cfg(feature = "live")]
use ratelimit_core::LiveAlgorithm;
use ratelimit_core::{Answer, AnyAlgorithm, Decision, MemoryStore, Store, StoreError};
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// Where limits keep their state, as settings: an app reads this from its
/// configuration and calls [`build`](Self::build) for each limit, and
/// writes no glue between the two stores. [`StoreSettings::redis`] gives
/// Redis with every default.
///
/// With the `serde` feature it deserializes from a table whose `kind` is
/// `memory` or `redis`, durations written as in `ratelimit_core::plumbing::parse_duration`:
///
/// ```toml
/// [store]
/// kind = "redis"
/// url = "redis://127.0.0.1:6379/"  # or rediss://, redis+sentinel://, a cluster's list
/// tls-ca = "/etc/redis/ca.pem"  # rediss:// only; default: the web roots
/// prefix = "myapp:"          # default "ratelimit:"
/// timeout = "50ms"           # default 50ms
/// fallback-max-keys = 50000  # decide in memory while Redis fails
/// lease = 10                 # local leases for hot keys (off by default)
/// key-secret = "..."         # 32 hex digits; default: shared through Redis
/// ```
///
/// ```
/// use ratelimit_core::{Gcra, ManualClock, Clock};
/// use ratelimit_redis::{AnyStore, StoreSettings};
/// use std::time::Duration;
///
/// let settings = StoreSettings::Memory { max_keys: Some(100_000) };
/// let store: AnyStore<String> =
///     settings.build("login", Gcra::new(5, Duration::from_secs(60)).unwrap(), None).unwrap();
/// assert!(matches!(store, AnyStore::Memory(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)
)]
#[non_exhaustive]
pub enum StoreSettings {
    /// A [`MemoryStore`] per limit, on this instance only.
    Memory {
        /// The cap on keys with state per limit (see
        /// [`MemoryStoreBuilder::max_keys`](ratelimit_core::store::MemoryStoreBuilder::max_keys));
        /// `None`: no cap.
        #[cfg_attr(feature = "serde", serde(default, rename = "max-keys"))]
        max_keys: Option<usize>,
    },
    /// A [`RedisStore`] per limit, shared by every instance using the same
    /// server and prefix.
    Redis {
        /// Where the state lives, in any form of [`Target`](crate::Target):
        /// `redis://host:port/db`, `rediss://` (TLS),
        /// `redis+sentinel://host:port[,host:port...]/service`, or a
        /// comma-separated list of `redis://` Cluster node URLs.
        url: String,
        /// A PEM file of the CA certificates a `rediss://` server's
        /// certificate must chain to (default: the web roots).
        #[cfg_attr(feature = "serde", serde(default, rename = "tls-ca"))]
        tls_ca: Option<std::path::PathBuf>,
        /// The prefix of every key (default [`DEFAULT_PREFIX`]); each
        /// limit's name is appended, so limits never share state.
        #[cfg_attr(feature = "serde", serde(default))]
        prefix: Option<String>,
        /// The longest a check waits for Redis (default
        /// [`DEFAULT_TIMEOUT`]).
        #[cfg_attr(
            feature = "serde",
            serde(default, deserialize_with = "serde_duration::option")
        )]
        timeout: Option<Duration>,
        /// With a value, decide in a local memory store of at most this
        /// many keys while Redis fails (see
        /// [`RedisStoreBuilder::fallback_to_memory`](crate::RedisStoreBuilder::fallback_to_memory));
        /// without, a failure is an error and the HTTP layer's policy
        /// decides.
        #[cfg_attr(feature = "serde", serde(default, rename = "fallback-max-keys"))]
        fallback_max_keys: Option<usize>,
        /// With a value, local leases of that many units for 1 s for hot
        /// keys (see
        /// [`RedisStoreBuilder::lease`](crate::RedisStoreBuilder::lease):
        /// a limit may then be exceeded by `instances * (lease - 1)` per
        /// window); off by default.
        #[cfg_attr(feature = "serde", serde(default))]
        lease: Option<u64>,
        /// The secret that secret keys (API keys, tokens) are hashed with
        /// in Redis key names, the same on every instance (see
        /// [`RedisStoreBuilder::key_secret`](crate::RedisStoreBuilder::key_secret));
        /// `None`: shared through Redis at `{prefix}key-secret`.
        #[cfg_attr(feature = "serde", serde(default, rename = "key-secret"))]
        key_secret: Option<KeySecret>,
    },
}

impl Default for StoreSettings {
    /// Memory, without a cap.
    fn default() -> Self {
        Self::Memory { max_keys: None }
    }
}

impl StoreSettings {
    /// Redis at `url` (any form of [`Target`]), every other setting its
    /// default: prefix [`DEFAULT_PREFIX`], timeout [`DEFAULT_TIMEOUT`], no
    /// fallback, no leases, the key secret shared through Redis.
    ///
    /// ```
    /// use ratelimit_redis::StoreSettings;
    ///
    /// let settings = StoreSettings::redis("redis://127.0.0.1:6379/");
    /// assert!(matches!(settings, StoreSettings::Redis { lease: None, .. }));
    /// ```
    pub fn redis(url: impl Into<String>) -> Self {
        Self::Redis {
            url: url.into(),
            tls_ca: None,
            prefix: None,
            timeout: None,
            fallback_max_keys: None,
            lease: None,
            key_secret: None,
        }
    }

    /// The store of the limit named `name`, deciding with `limit` (fixed
    /// settings, or a policy table's [`LiveAlgorithm`]), banning a key its
    /// limit denies for `ban` (a policy file's `ban = "1h"`; `None`: no
    /// ban). One call takes every option: nothing can be left out by
    /// picking another constructor.
    ///
    /// In Redis, the keys of the limit are
    /// `{prefix}{name}:{{key}}:{algorithm}:{fingerprint}` (a live limit's:
    /// `{prefix}{name}:{{key}}:live`): two limits never share state. A live
    /// limit keeps each key's used quota across a change, in memory and in
    /// Redis alike (see [`LiveRedis`]). Fails on a bad URL, a prefix with
    /// braces, a name that breaks the rule
    /// ([`is_valid_limit_name`](ratelimit_core::plumbing::is_valid_limit_name)), or
    /// an algorithm the Redis scripts cannot decide exactly (see
    /// [`RedisStoreBuilder::build`](crate::RedisStoreBuilder::build)).
    /// Nothing connects here: a Redis store connects on first use.
    ///
    /// ```
    /// use ratelimit_core::{BanPolicy, Gcra};
    /// use ratelimit_redis::{AnyStore, StoreSettings};
    /// use std::time::Duration;
    ///
    /// let settings = StoreSettings::Memory { max_keys: Some(100_000) };
    /// let ban = BanPolicy::new(Duration::from_secs(3600))?;
    /// let gcra = Gcra::new(5, Duration::from_secs(60))?;
    /// let store: AnyStore<String> = settings.build("login", gcra, Some(ban))?;
    /// assert!(matches!(store, AnyStore::Memory(_)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build<K>(
        &self,
        name: &str,
        limit: impl Into<LimitSettings>,
        ban: Option<BanPolicy>,
    ) -> Result<AnyStore<K>, RedisBuildError> {
        check_name(name)?;
        let max_keys = match self {
            Self::Memory { max_keys } => Some(*max_keys),
            Self::Redis { .. } => None,
        };
        Ok(match (limit.into(), max_keys) {
            (LimitSettings::Fixed(algorithm), Some(max_keys)) => AnyStore::Memory(
                MemoryStore::<AnyAlgorithm, K>::builder(algorithm)
                    .max_keys(max_keys)
                    .ban(ban)
                    .build()
                    .map_err(|e| RedisBuildError::Setting(e.to_string()))?,
            ),
            (LimitSettings::Fixed(algorithm), None) => {
                AnyStore::Redis(self.redis_builder(name, algorithm)?.ban(ban).build()?)
            }
            #[cfg(feature = "live")]
            (LimitSettings::Live(live), Some(max_keys)) => AnyStore::LiveMemory(
                MemoryStore::<LiveAlgorithm, K>::builder(live)
                    .max_keys(max_keys)
                    .ban(ban)
                    .build()
                    .map_err(|e| RedisBuildError::Setting(e.to_string()))?,
            ),
            #[cfg(feature = "live")]
            (LimitSettings::Live(live), None) => {
                AnyStore::LiveRedis(Box::new(self.redis_builder(name, live)?.ban(ban).build()?))
            }
        })
    }

    /// The builder of the Redis store of the limit `name`.
    fn redis_builder<L>(
        &self,
        name: &str,
        limit: L,
    ) -> Result<RedisStoreBuilder<L>, RedisBuildError> {
        let Self::Redis {
            url,
            tls_ca,
            prefix,
            timeout,
            fallback_max_keys,
            lease,
            key_secret,
        } = self
        else {
            return Err(RedisBuildError::Url(
                "memory settings have no redis url".to_owned(),
            ));
        };
        let prefix = format!("{}{name}:", prefix.as_deref().unwrap_or(DEFAULT_PREFIX));
        let target = Target::parse(url, tls_ca.as_deref())?;
        let mut builder = RedisStoreBuilder::new(target, limit)
            .name(name)
            .prefix(prefix)
            .timeout(timeout.unwrap_or(DEFAULT_TIMEOUT))
            .breaker(BreakerConfig::default());
        if let Some(max) = fallback_max_keys {
            builder = builder.fallback_to_memory(*max);
        }
        if let Some(secret) = key_secret {
            builder = builder.key_secret(secret.0);
        }
        if let Some(size) = lease {
            builder = builder.lease(*size, Duration::from_secs(1));
        }
        Ok(builder)
    }
}

/// What a limit built by [`StoreSettings::build`] decides with: fixed
/// settings, or live ones that a policy table's reloads and overrides
/// change (feature `live`).
///
/// ```
/// use ratelimit_core::{AnyAlgorithm, Gcra};
/// use ratelimit_redis::LimitSettings;
/// use std::time::Duration;
///
/// let fixed = LimitSettings::from(Gcra::new(5, Duration::from_secs(60))?);
/// assert!(matches!(fixed, LimitSettings::Fixed(AnyAlgorithm::Gcra(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LimitSettings {
    /// These settings, for the store's life.
    Fixed(AnyAlgorithm),
    /// Settings changed while the store runs, each key keeping its used
    /// quota (a policy table's limits).
    #[cfg(feature = "live")]
    Live(LiveAlgorithm),
}

#[cfg(feature = "live")]
impl From<&LiveAlgorithm> for LimitSettings {
    fn from(live: &LiveAlgorithm) -> Self {
        Self::Live(live.clone())
    }
}

macro_rules! fixed_from {
    ($($t:ty),*) => {$(
        impl From<$t> for LimitSettings {
            fn from(a: $t) -> Self {
                Self::Fixed(a.into())
            }
        }
    )*};
}

fixed_from!(
    AnyAlgorithm,
    ratelimit_core::Gcra,
    ratelimit_core::TokenBucket,
    ratelimit_core::LeakyBucket,
    ratelimit_core::FixedWindow,
    ratelimit_core::SlidingWindow,
    ratelimit_core::SlidingLog
);

/// `Ok` for a name that keeps the limit-name rule.
fn check_name(name: &str) -> Result<(), RedisBuildError> {
    if ratelimit_core::plumbing::is_valid_limit_name(name) {
        Ok(())
    } else {
        Err(RedisBuildError::LimitName(name.to_owned()))
    }
}

#[cfg(feature = "serde")]
mod serde_duration {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub(super) fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s = String::deserialize(d)?;
        ratelimit_core::plumbing::parse_duration(&s)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// A store that is either in memory or in Redis, chosen at run time (by
/// [`StoreSettings`], or built directly): it implements
/// [`Store`] for any key both do, so the HTTP layer takes it like either.
///
/// ```
/// use ratelimit_core::{Gcra, Store};
/// use ratelimit_redis::{AnyStore, StoreSettings, StoreState};
/// use std::time::Duration;
///
/// let settings = StoreSettings::Memory { max_keys: Some(1_000) };
/// let gcra = Gcra::new(1, Duration::from_secs(60))?;
/// let store: AnyStore<String> = settings.build("login", gcra, None)?;
/// assert_eq!(store.state(), StoreState::Memory);
/// let answer = store.check(&"alice".to_string(), 1, 0);
/// assert!(answer.is_ready());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A memory check stays a ready future (no allocation); a Redis check is
/// the [`RedisStore`]'s future.
#[non_exhaustive]
// The memory store is the hot variant: kept inline, not behind a box.
#[allow(clippy::large_enum_variant)]
pub enum AnyStore<K> {
    /// In this instance's memory.
    Memory(MemoryStore<AnyAlgorithm, K>),
    /// In Redis (with its failure policy and fallback, if set).
    Redis(RedisStore),
    /// In memory, following a [`LiveAlgorithm`].
    #[cfg(feature = "live")]
    LiveMemory(MemoryStore<LiveAlgorithm, K>),
    /// In Redis, following a [`LiveAlgorithm`], carrying each key over.
    #[cfg(feature = "live")]
    LiveRedis(Box<LiveRedis>),
}

impl<K> AnyStore<K> {
    /// How many instances share its limits, as last counted in Redis (see
    /// [`RedisStore::instances`]); 1 in memory.
    pub fn instances(&self) -> u64 {
        match self {
            Self::Redis(store) => store.instances(),
            #[cfg(feature = "live")]
            Self::LiveRedis(store) => store.instances(),
            _ => 1,
        }
    }

    /// Where its decisions come from now: memory, Redis, the fallback, or
    /// none (Redis failing, no fallback).
    pub fn state(&self) -> crate::StoreState {
        match self {
            Self::Memory(_) => crate::StoreState::Memory,
            Self::Redis(store) => store.state(),
            #[cfg(feature = "live")]
            Self::LiveMemory(_) => crate::StoreState::Memory,
            #[cfg(feature = "live")]
            Self::LiveRedis(store) => store.state(),
        }
    }
}

impl<K> AnyStore<K> {
    /// The algorithm the store decides with (for a live store, its
    /// current default).
    pub fn algorithm(&self) -> AnyAlgorithm {
        match self {
            Self::Memory(m) => *m.algorithm(),
            Self::Redis(r) => *r.algorithm(),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.algorithm().get(),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => r.live().get(),
        }
    }
}

impl<K> fmt::Debug for AnyStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory(m) => f.debug_tuple("Memory").field(m).finish(),
            Self::Redis(r) => f.debug_tuple("Redis").field(r).finish(),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => f.debug_tuple("LiveMemory").field(m).finish(),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => f.debug_tuple("LiveRedis").field(r).finish(),
        }
    }
}

impl<K> From<MemoryStore<AnyAlgorithm, K>> for AnyStore<K> {
    fn from(store: MemoryStore<AnyAlgorithm, K>) -> Self {
        Self::Memory(store)
    }
}

impl<K> From<RedisStore> for AnyStore<K> {
    fn from(store: RedisStore) -> Self {
        Self::Redis(store)
    }
}

impl<K> Store<K> for AnyStore<K>
where
    K: Hash + Eq + StableKey + Clone + fmt::Display + Send + Sync + 'static,
{
    type CheckFuture = StoreFuture<Decision>;
    type WriteFuture = StoreFuture<()>;

    /// In memory, at once; in Redis, as [`RedisStore`] answers.
    #[inline]
    fn check(
        &self,
        key: &K,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        match self {
            Self::Memory(m) => Answer::ready(m.check(key, cost, now).value()),
            Self::Redis(r) => Store::<K>::check(r, key, cost, now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => Answer::ready(m.check(key, cost, now).value()),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => Store::<K>::check(&r.store_for(key), key, cost, now),
        }
    }

    fn refund(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        match self {
            Self::Memory(m) => Answer::ready(m.refund(key, cost, admitted_at, now).value()),
            Self::Redis(r) => Store::<K>::refund(r, key, cost, admitted_at, now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => Answer::ready(m.refund(key, cost, admitted_at, now).value()),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => {
                Store::<K>::refund(&r.store_for(key), key, cost, admitted_at, now)
            }
        }
    }

    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, SettleFuture> {
        match self {
            Self::Memory(m) => m.settle(key, reserved, actual, admitted_at, now),
            Self::Redis(r) => Store::<K>::settle(r, key, reserved, actual, admitted_at, now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.settle(key, reserved, actual, admitted_at, now),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => {
                Store::<K>::settle(&r.store_for(key), key, reserved, actual, admitted_at, now)
            }
        }
    }

    fn reset(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        match self {
            Self::Memory(m) => Answer::ready(m.reset(key).value()),
            Self::Redis(r) => Store::<K>::reset(r, key),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => Answer::ready(m.reset(key).value()),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => Store::<K>::reset(&r.store_for(key), key),
        }
    }

    fn ban(
        &self,
        key: &K,
        duration: Duration,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        match self {
            Self::Memory(m) => Answer::ready(m.ban(key, duration, now).value()),
            Self::Redis(r) => Store::<K>::ban(r, key, duration, now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => Answer::ready(m.ban(key, duration, now).value()),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => Store::<K>::ban(&r.store_for(key), key, duration, now),
        }
    }

    fn unban(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        match self {
            Self::Memory(m) => Answer::ready(m.unban(key).value()),
            Self::Redis(r) => Store::<K>::unban(r, key),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => Answer::ready(m.unban(key).value()),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => Store::<K>::unban(&r.store_for(key), key),
        }
    }

    fn ban_left(
        &self,
        key: &K,
        now: u64,
    ) -> Answer<Result<Option<Duration>, StoreError>, BanLeftFuture> {
        match self {
            Self::Memory(m) => m.ban_left(key, now),
            Self::Redis(r) => Store::<K>::ban_left(r, key, now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.ban_left(key, now),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => Store::<K>::ban_left(&r.store_for(key), key, now),
        }
    }
}

impl<K: Hash + Eq> Upkeep for AnyStore<K> {
    fn maintain(&self, now: u64) -> usize {
        match self {
            Self::Memory(m) => m.maintain(now),
            Self::Redis(r) => r.maintain(now),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.maintain(now),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => r.maintain(now),
        }
    }

    fn counts(&self) -> Option<StoreCounts> {
        match self {
            Self::Memory(m) => m.counts(),
            Self::Redis(r) => r.counts(),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.counts(),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => r.counts(),
        }
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        match self {
            Self::Memory(m) => m.algorithm_names(),
            Self::Redis(r) => r.algorithm_names(),
            #[cfg(feature = "live")]
            Self::LiveMemory(m) => m.algorithm_names(),
            #[cfg(feature = "live")]
            Self::LiveRedis(r) => vec![r.algorithm_name()],
        }
    }
}
