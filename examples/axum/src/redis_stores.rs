//! Limits shared through Redis, so that every copy of the app admits the
//! configured limits together.

use crate::Stores;
use hyper_example::max_keys::DEFAULT_MAX_KEYS;
use ratelimit_core::{BanPolicy, LiveAlgorithm};
use ratelimit_redis::{
    AnyStore, RedisBuildError, RedisEntries, StoreSettings, StoreState, Target, DEFAULT_TIMEOUT,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tower_ratelimit::policy::PolicyKey;

/// A limit's name and its store.
type Built = (String, Arc<AnyStore<PolicyKey>>);

/// Stores in Redis: one key prefix per limit (`axum-example:{name}:`), time
/// from the server's clock, one round trip per check.
///
/// When Redis is down or slow (more than the timeout, 50 ms by default),
/// each copy limits on its own in memory (at most a million keys per limit
/// by default, see [`max_keys`](Self::max_keys)) until Redis is back: the
/// service stays up. Each copy then admits its share of each limit (the
/// limit divided by the copies it last saw through Redis, at least 1):
/// the copies together admit about the limit.
#[derive(Debug, Clone)]
pub struct RedisStores {
    target: Target,
    url: String,
    tls_ca: Option<PathBuf>,
    timeout: Duration,
    max_keys: usize,
    lease: Option<u64>,
    /// Every store built, by limit, for `GET /ready`.
    built: Arc<Mutex<Vec<Built>>>,
}

impl RedisStores {
    /// Stores on the server at `url` (`redis://host:port/db`, or any form
    /// of [`Target`]: `rediss://`, `redis+sentinel://`, a Cluster's node
    /// list). Nothing connects until the first request.
    pub fn new(url: &str) -> Result<Self, RedisBuildError> {
        Self::open(url, None)
    }

    /// Stores at `url`, a `rediss://` server's certificate checked
    /// against the CA certificates in the PEM file `tls_ca`
    /// (`REDIS_TLS_CA`) instead of the web roots.
    pub fn open(url: &str, tls_ca: Option<&Path>) -> Result<Self, RedisBuildError> {
        Ok(Self {
            target: Target::parse(url, tls_ca)?,
            url: url.to_owned(),
            tls_ca: tls_ca.map(Path::to_path_buf),
            timeout: DEFAULT_TIMEOUT,
            max_keys: DEFAULT_MAX_KEYS,
            lease: None,
            built: Arc::default(),
        })
    }

    /// How long a check waits for Redis before deciding in memory.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most keys each limit keeps in memory while Redis is away
    /// (default [`DEFAULT_MAX_KEYS`], `RATELIMIT_MAX_KEYS`; at least 1).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }
}

impl RedisStores {
    /// Where the stores connect, passwords masked (for logs).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The run-time entries of the admin API (allow and deny list
    /// entries, overrides), shared by every copy under `axum-example:`.
    pub fn entries(&self) -> Result<RedisEntries, RedisBuildError> {
        RedisEntries::new(self.target.clone(), "axum-example:")
    }

    /// Local leases of `size` units for 1 s (`RATELIMIT_LEASE`; off by
    /// default): a hot key costs one round trip per `size` requests, and
    /// a limit may be exceeded by `copies * (size - 1)` per window (see
    /// `ratelimit_redis::RedisStoreBuilder::lease`).
    pub fn lease(mut self, size: u64) -> Self {
        self.lease = Some(size);
        self
    }
}

impl Stores for RedisStores {
    type Store = Arc<AnyStore<PolicyKey>>;

    /// A Redis store following `live`: a change keeps what each client has
    /// used, in Redis too (each copy of the app reloads its own file).
    fn store(&self, name: &str, live: &LiveAlgorithm, ban: Option<BanPolicy>) -> Self::Store {
        let store = StoreSettings::Redis {
            url: self.url.clone(),
            tls_ca: self.tls_ca.clone(),
            prefix: Some("axum-example:".to_owned()),
            timeout: Some(self.timeout),
            fallback_max_keys: Some(self.max_keys),
            lease: self.lease,
            key_secret: None,
        }
        .build(name, live, ban)
        .expect("the example's limits and names suit Redis");
        let store = Arc::new(store);
        self.built
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_owned(), store.clone()));
        store
    }

    fn states(&self) -> crate::StatesFn {
        let built = self.built.clone();
        Arc::new(move || {
            built
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(name, store)| (name.clone(), store.state(), store.instances()))
                .collect::<Vec<(String, StoreState, u64)>>()
        })
    }
}
