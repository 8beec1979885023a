//! What a [`RedisStore`] is and where it stands: its limits, its breaker,
//! where its decisions come from, the Redis keys and script of a key, and
//! whether Redis answers.

use crate::outage::breaker::BreakerState;
use crate::outage::failure::{Failure, Kind};
use crate::scripts::args::OpArg;
use crate::store::RedisStore;
use crate::StoreState;
#[cfg(doc)]
use ratelimit_core::StableKey;
use ratelimit_core::{AnyAlgorithm, StoreError};
use redis::ToRedisArgs;
use std::fmt;

impl RedisStore {
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
