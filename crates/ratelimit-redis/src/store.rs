//! Every method of a [`RedisStore`]: its builder, what it is and where it
//! stands (its limits, breaker, state, a key's Redis keys, `ping`), the
//! shared key secret and write-back, leases given back, and the [`Store`]
//! impl, which resolves a key's name and hands the call to `Inner`.

use crate::builder::RedisStoreBuilder;
use crate::check_future::StoreFuture;
#[cfg(feature = "live")]
use crate::connect::conn::Conn;
use crate::connect::target::Target;
#[cfg(doc)]
use crate::connect::time_source::TimeSource;
use crate::fleet::invalidation::{self, Listener};
#[cfg(feature = "live")]
use crate::fleet::lease::Unspent;
use crate::fleet::write_back::WRITE_BACK_EVERY;
pub use crate::inner::RedisStore;
use crate::outage::breaker::BreakerState;
use crate::outage::failure::{Failure, Kind};
use crate::outage::fallback::Fallback;
use crate::scripts::args::OpArg;
use crate::StoreState;
use ratelimit_core::algorithm::StableKey;
use ratelimit_core::store::{BanLeftFuture, SettleFuture, StoreCounts, Upkeep};
#[cfg(doc)]
use ratelimit_core::MemoryStore;
use ratelimit_core::{Algorithm, Answer, AnyAlgorithm, Decision, Store, StoreError};
use redis::ToRedisArgs;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often [`Upkeep::maintain`] writes the shared key secret back and
/// reads it (see [`RedisStoreBuilder::key_secret`](crate::RedisStoreBuilder::key_secret)).
pub const KEY_SECRET_SYNC: Duration = Duration::from_secs(1);

impl RedisStore {
    /// Writes the cached key secret back to Redis if it is gone (`SET
    /// NX`) and reads it again, adopting what Redis holds; what
    /// [`Upkeep::maintain`] does every [`KEY_SECRET_SYNC`]. Nothing to do
    /// with a secret from the builder.
    pub async fn sync_key_secret(&self) -> Result<(), StoreError> {
        self.inner
            .conn
            .sync_secret(self.inner.timeout)
            .await
            .map_err(|f| f.to_store_error())
    }

    /// How many instances share this store's limits, as last counted in
    /// Redis (this one included; 1 until counted, and without a fallback):
    /// the `k` whose share of each limit its fallback admits while Redis
    /// is away (see [`outage_share`](crate::RedisStoreBuilder::outage_share)).
    pub fn instances(&self) -> u64 {
        self.inner.roster.as_ref().map_or(1, |r| r.instances())
    }

    /// Writes back the bans and denials this store holds if Redis lost
    /// its data (its marker `{prefix}epoch` is not the one this store
    /// read last), `now` being the caller's time as at a check; what
    /// [`Upkeep::maintain`] does every [`WRITE_BACK_EVERY`]. Returns how
    /// many keys were written (0: no loss seen, Redis already refused
    /// them as long, or another write-back of this store was running). An
    /// error when the marker cannot be read, or some
    /// keys were not written (tried again at the next call).
    ///
    /// ```
    /// # use ratelimit_core::Gcra;
    /// # use ratelimit_redis::RedisStore;
    /// # use std::time::Duration;
    /// # #[tokio::main]
    /// # async fn main() {
    /// let store = RedisStore::builder("redis://127.0.0.1:1/", Gcra::new(5, Duration::from_secs(60)).unwrap())
    ///     .build()
    ///     .unwrap();
    /// // Nothing listens on port 1: the marker cannot be read.
    /// assert!(store.write_back(0).await.is_err());
    /// # }
    /// ```
    pub async fn write_back(&self, now: u64) -> Result<usize, StoreError> {
        self.inner.write_back(now).await
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

    /// A builder for a store on `target` (a URL or a [`redis::Client`])
    /// deciding with `algorithm` (any of ratelimit-core's six, or an
    /// [`AnyAlgorithm`]).
    pub fn builder(
        target: impl Into<Target>,
        algorithm: impl Into<AnyAlgorithm>,
    ) -> RedisStoreBuilder {
        RedisStoreBuilder::new(target.into(), algorithm.into())
    }

    /// The algorithm (the first limit's, with
    /// [`and_limit`](crate::RedisStoreBuilder::and_limit)).
    pub fn algorithm(&self) -> &AnyAlgorithm {
        &self.inner.script.parts[0].algorithm
    }

    /// Every limit's algorithm, in check order.
    pub fn algorithms(&self) -> impl ExactSizeIterator<Item = &AnyAlgorithm> {
        self.inner.script.parts.iter().map(|p| &p.algorithm)
    }

    /// The circuit breaker's current state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Where its decisions come from now: Redis while the breaker is
    /// closed, else the in-memory fallback if it has one, else none.
    pub fn state(&self) -> StoreState {
        match (self.breaker_state(), self.inner.policy.fallback.is_some()) {
            (BreakerState::Closed, _) => StoreState::Redis,
            (_, true) => StoreState::Fallback,
            (_, false) => StoreState::Down,
        }
    }

    /// The Redis key holding `key`'s state (for the first limit; see
    /// [`redis_keys`](Self::redis_keys)).
    pub fn redis_key(&self, key: &str) -> String {
        let script = &self.inner.script;
        script.redis_key(key, &script.parts[0])
    }

    /// The Redis keys holding `key`'s state, one per limit, in check order.
    pub fn redis_keys(&self, key: &str) -> Vec<String> {
        let script = &self.inner.script;
        script
            .parts
            .iter()
            .map(|p| script.redis_key(key, p))
            .collect()
    }

    /// The SHA1 of the store's script (what `EVALSHA` is called with).
    pub fn script_hash(&self) -> &str {
        self.inner.script.slot.script.get_hash()
    }

    /// The script's arguments for a check of `key` at `now` (`None`: the
    /// server's time), as `EVALSHA hash n KEYS[1..n] ARGV...` takes them,
    /// with `n` the number of limits plus one, the ban key (2 unless
    /// [`and_limit`](crate::RedisStoreBuilder::and_limit)); for benchmarks and
    /// debugging with other clients.
    pub fn script_args(&self, key: &str, cost: u64, now: Option<u64>) -> Vec<String> {
        let mut args = self.redis_keys(key);
        args.push(self.inner.script.ban_key(key));
        let call = self.inner.script.args(key, cost, now, None, OpArg::Check);
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
        Some(self.redis_key(&name))
    }

    /// Gives every lease's unspent units back to Redis and waits for it
    /// (see [`RedisStoreBuilder::lease`](crate::RedisStoreBuilder::lease));
    /// for a graceful shutdown.
    pub async fn release_leases(&self) {
        for (u, now) in self.inner.drain_leases() {
            let _ = self.inner.refund(u.key, u.units, u.taken_at, now).await;
        }
    }

    /// Takes every lease's unspent units out of this store (a live
    /// store's old version), with the caller's time now, for another
    /// store to give back.
    #[cfg(feature = "live")]
    pub(crate) fn take_leases(&self) -> Vec<(Unspent, u64)> {
        self.inner.drain_leases()
    }

    /// Gives `unspent` back to Redis through this store, in tasks (see
    /// [`take_leases`](Self::take_leases)).
    #[cfg(feature = "live")]
    pub(crate) fn give_back(&self, unspent: Vec<(Unspent, u64)>) {
        for (u, now) in unspent {
            self.inner.give_back(Some(u), now);
        }
    }

    /// Subscribes the store to its Redis's and prefix's changes.
    pub(crate) fn join_invalidation(&self) {
        let listener = Arc::downgrade(&self.inner) as Weak<dyn Listener>;
        invalidation::join(&self.inner.conn, &self.inner.script.prefix, listener);
    }

    fn render<K: fmt::Display + ?Sized>(key: &K) -> String {
        key.to_string()
    }
}

impl<K> Store<K> for RedisStore
where
    K: fmt::Display + StableKey + Send + Sync + ?Sized,
{
    type CheckFuture = StoreFuture<Decision>;
    type WriteFuture = StoreFuture<()>;

    /// Decides in Redis (see [`TimeSource`] for what `now` is used for),
    /// or at once from the deny cache. A key marked secret
    /// ([`StableKey::is_secret`]) goes by its keyed hash.
    fn check(
        &self,
        key: &K,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        let inner = Arc::clone(&self.inner);
        let key = match inner.name(Self::render(key), key.is_secret()) {
            Ok(name) => name,
            Err(text) => {
                return Answer::pending(Box::pin(async move {
                    match inner.name_later(text).await {
                        Ok(name) => inner.check(name, cost, now).await,
                        Err((failure, text)) => inner.policy.check(&failure, &text, cost, now),
                    }
                }))
            }
        };
        if let Some(d) = inner.cached(&key, cost, now) {
            return Answer::ready(Ok(d));
        }
        Answer::pending(Box::pin(async move { inner.check(key, cost, now).await }))
    }

    /// Gives back `cost` admitted at `admitted_at` (the caller's clock,
    /// like `now`).
    fn refund(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Answer::pending(Box::pin(async move {
            match inner.resolved(text, secret).await {
                Ok(name) => inner.refund(name, cost, admitted_at, now).await,
                Err((failure, text)) => {
                    inner.policy.refund(&failure, &text, cost, admitted_at, now)
                }
            }
        }))
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
    ) -> Answer<Result<Decision, StoreError>, SettleFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Answer::pending(Box::pin(async move {
            match inner.resolved(text, secret).await {
                Ok(name) => inner.settle(name, reserved, actual, admitted_at, now).await,
                Err((failure, text)) => {
                    inner
                        .policy
                        .settle(&failure, &text, reserved, actual, admitted_at, now)
                }
            }
        }))
    }

    /// Deletes the key's state in Redis (every limit's key; a secret key's
    /// keyed-hash name), and forgets it in the deny cache, the leases and
    /// the fallback.
    fn reset(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Answer::pending(Box::pin(async move {
            match inner.named(text, secret).await {
                Ok(name) => inner.reset(name).await,
                Err((e, text)) => {
                    if let Some(memory) = &inner.policy.fallback {
                        memory.reset(&text);
                    }
                    Err(e)
                }
            }
        }))
    }

    /// Bans the key in Redis for `duration` (at least 1 ms, in whole ms)
    /// from now: Redis's time, or `now` with [`TimeSource::Caller`].
    fn ban(
        &self,
        key: &K,
        duration: Duration,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        let ms = u64::try_from(duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Answer::pending(Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.ban(name, ms, now).await
        }))
    }

    /// What is left of the key's ban in Redis, if it is banned.
    fn ban_left(
        &self,
        key: &K,
        now: u64,
    ) -> Answer<Result<Option<Duration>, StoreError>, BanLeftFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Answer::pending(Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.ban_left(name, now).await
        }))
    }

    /// Lifts the key's ban in Redis (what it used stays used).
    fn unban(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let inner = Arc::clone(&self.inner);
        let (text, secret) = (Self::render(key), key.is_secret());
        Answer::pending(Box::pin(async move {
            let name = inner.named(text, secret).await.map_err(|(e, _)| e)?;
            inner.unban(name).await
        }))
    }
}

impl Upkeep for RedisStore {
    /// Bounded upkeep of the in-memory fallback, if any (see
    /// [`MemoryStore`]'s [`Upkeep::maintain`]): the keys it took during an outage are
    /// dropped once full, and its memory given back. With leases, the
    /// unspent units of expired leases are given back (in tasks). Every
    /// [`KEY_SECRET_SYNC`], the shared key secret is written back if
    /// Redis lost it, and read (in a task; see
    /// [`sync_key_secret`](RedisStore::sync_key_secret)); every
    /// [`WRITE_BACK_EVERY`], so are the bans and denials this store holds
    /// (in a task; see [`write_back`](RedisStore::write_back)).
    fn maintain(&self, now: u64) -> usize {
        if let Some(leases) = &self.inner.leases {
            for u in leases.drain_expired(self.inner.local_now(now)) {
                self.inner.give_back(Some(u), now);
            }
        }
        let dropped = match &self.inner.policy.fallback {
            Some(fallback) => fallback.maintain(now),
            None => 0,
        };
        if self.inner.conn.sync_due(KEY_SECRET_SYNC) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let store = self.clone();
                runtime.spawn(async move {
                    let _ = store.sync_key_secret().await;
                });
            }
        }
        if self.inner.write_back.due(WRITE_BACK_EVERY) {
            self.inner.spawn_write_back(now);
        }
        dropped
    }

    /// The in-memory fallback's keys and evictions, if it has one.
    fn counts(&self) -> Option<StoreCounts> {
        self.inner.policy.fallback.as_ref().map(Fallback::counts)
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        self.algorithms().map(Algorithm::name).collect()
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("RedisStore")
            .field("algorithms", &self.algorithms().collect::<Vec<_>>())
            .field("prefix", &inner.script.prefix)
            .field("timeout", &inner.timeout)
            .field("breaker", &inner.breaker.state())
            .field("fallback", &inner.policy.fallback.is_some())
            .field("time", &inner.script.time)
            .field(
                "deny_cache",
                &inner.deny.as_ref().map_or(0, |d| d.capacity()),
            )
            .finish_non_exhaustive()
    }
}
