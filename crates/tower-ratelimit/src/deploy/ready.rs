//! `Limits::ready`: whether every limit's store answers now.

use super::limits::Limits;
use ratelimit_redis::AnyStore;
use std::sync::PoisonError;

impl Limits {
    /// Whether every limit's store answers: memory always, Redis when it
    /// answers a `PING` within the store's timeout (a store deciding in
    /// its fallback is not ready). A store that does not answer is
    /// logged, naming the limit. False before [`apply`](Self::apply).
    pub async fn ready(&self) -> bool {
        if self.inner.handle.get().is_none() {
            return false;
        }
        let stores = self
            .inner
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut ready = true;
        for (name, store) in stores {
            let answer = match &*store {
                AnyStore::Redis(redis) => redis.ping().await,
                AnyStore::LiveRedis(live) => live.store_for("ready-probe").ping().await,
                _ => Ok(()),
            };
            if let Err(e) = answer {
                tracing::warn!(limit = %name, error = %e, "not ready: the limit's store does not answer");
                ready = false;
            }
        }
        ready
    }
}
