//! Bounded upkeep of a layer's stores, every second on tokio.
//!
//! A [`MemoryStore`](ratelimit_core::MemoryStore) drops keys that are back
//! to full when new keys arrive, but after a flood of keys has stopped, no
//! request comes to trigger that. When a layer is built inside a tokio
//! runtime, a task calls
//! [`Upkeep::maintain`](ratelimit_core::store::Upkeep::maintain) on each of its
//! stores once a second, at the layer's clock's time: bounded steps that
//! drop full keys and shrink tables, so the memory a flood took is given
//! back within seconds of its keys being full. The task holds only weak references
//! and ends when the layer and its services are dropped.
//!
//! Each tick also reads each store's
//! [`Upkeep::counts`](ratelimit_core::store::Upkeep::counts) (keys held,
//! evictions at the cap, new keys refused from what evicted keys had used):
//! metrics `ratelimit_store_keys`, `ratelimit_store_evictions_total` and
//! `ratelimit_store_new_keys_refused_total` (feature `metrics`), and a log
//! line at most once a minute while they grow.

use ratelimit_core::store::StoreCounts;
use ratelimit_core::{Clock, Store};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the stores are maintained.
pub(crate) const UPKEEP_PERIOD: Duration = Duration::from_secs(1);
/// How often a store's evictions and refused new keys are logged at most
/// (ns).
const LOG_EVERY: u64 = 60_000_000_000;

/// Starts the upkeep task of `stores` (each with its limit's name) if a
/// tokio runtime is running.
pub(crate) fn spawn<K, St>(stores: Vec<(&'static str, Weak<St>)>, clock: Arc<dyn Clock>)
where
    St: Store<K>,
    K: ?Sized + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut reports: Vec<Report> = stores.iter().map(|(name, _)| Report::new(name)).collect();
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = clock.now();
            let mut alive = false;
            for ((_, store), report) in stores.iter().zip(&mut reports) {
                if let Some(store) = store.upgrade() {
                    store.maintain(now);
                    if let Some(counts) = store.counts() {
                        report.update(counts, now);
                    }
                    alive = true;
                }
            }
            if !alive {
                return;
            }
        }
    });
}

/// What one limit's store last reported, for metrics and logs.
struct Report {
    name: &'static str,
    /// The counts when the last line was logged.
    logged: StoreCounts,
    /// When it was logged (ns of the layer's clock; `None`: never).
    at: Option<u64>,
}

impl Report {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            logged: StoreCounts::default(),
            at: None,
        }
    }

    /// Publishes `counts` as metrics, and logs what eviction did since
    /// the last line, at most once a minute: a `warn` when new keys were
    /// refused because the sketch of evicted keys covered them (a flood
    /// past the bound of the set of evicted keys, not merely past the
    /// cap), else an `info` when keys were evicted.
    fn update(&mut self, counts: StoreCounts, now: u64) {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("ratelimit_store_keys", "limit" => self.name).set(counts.keys as f64);
            metrics::counter!("ratelimit_store_evictions_total", "limit" => self.name)
                .absolute(counts.evicted);
            metrics::counter!("ratelimit_store_new_keys_refused_total", "limit" => self.name)
                .absolute(counts.refused);
        }
        let evicted = counts.evicted.saturating_sub(self.logged.evicted);
        let refused = counts.refused.saturating_sub(self.logged.refused);
        let due = self.at.is_none_or(|at| now.saturating_sub(at) >= LOG_EVERY);
        if !due || evicted == 0 && refused == 0 {
            return;
        }
        let (name, keys) = (self.name, counts.keys);
        if refused > 0 {
            tracing::warn!(
                limit = %name,
                refused,
                evicted,
                keys,
                "new keys refused at their first request since the last line: the key table \
                 is full and what evicted keys had used covers them (a flood of more keys \
                 than the cap); raise the store's max_keys (RATELIMIT_MAX_KEYS)"
            );
        } else {
            tracing::info!(
                limit = %name,
                evicted,
                keys,
                "keys evicted at the store's cap since the last line (what they had used is kept)"
            );
        }
        self.logged = counts;
        self.at = Some(now);
    }
}
