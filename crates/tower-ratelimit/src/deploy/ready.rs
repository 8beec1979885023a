//! `Limits::ready`: whether every limit can decide now.

use super::limits::Limits;
use ratelimit_redis::{AnyStore, StoreSettings};
use std::sync::PoisonError;

impl Limits {
    /// Whether every limit can decide now: in memory, on Redis, or on
    /// Redis's in-memory fallback while Redis is away (as
    /// [`StoreState::decides`](ratelimit_redis::StoreState::decides)).
    /// So with a fallback (`[store] fallback-max-keys`, or
    /// `RATELIMIT_MAX_KEYS`) it stays true through an outage, and a
    /// `/ready` probe keeps every copy serving; without one, Redis must
    /// answer a `PING` within the store's timeout. False before
    /// [`apply`](Self::apply).
    ///
    /// An outage is not a readiness failure: alert on it with
    /// [`stores`](Self::stores) (a limit in `fallback`) or the metrics
    /// `ratelimit_redis_breaker_state` and `ratelimit_redis_fallback_total`.
    /// A store that does not answer is logged, naming its limit, at most
    /// one line every 20 seconds in the whole process.
    pub async fn ready(&self) -> bool {
        if self.inner.handle.get().is_none() {
            return false;
        }
        if matches!(
            self.inner.deployment.store,
            StoreSettings::Redis {
                fallback_max_keys: Some(_),
                ..
            }
        ) {
            return true;
        }
        let stores = self
            .inner
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (name, store) in stores {
            let answer = match &*store {
                AnyStore::Redis(redis) => redis.ping().await,
                AnyStore::LiveRedis(live) => live.store_for("ready-probe").ping().await,
                _ => Ok(()),
            };
            if let Err(e) = answer {
                crate::observe::not_ready(&name, &e);
                // One Redis for every limit: the others would wait alike.
                return false;
            }
        }
        true
    }
}
