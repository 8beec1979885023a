//! Bounded upkeep of a layer's stores, every second on tokio.
//!
//! A [`MemoryStore`](ratelimit_core::MemoryStore) drops keys that are back
//! to full when new keys arrive, but after a flood of keys has stopped, no
//! request comes to trigger that. When a layer is built inside a tokio
//! runtime, a task calls [`Store::maintain`] on each of its stores once a
//! second, at the layer's clock's time: bounded steps that drop full keys
//! and shrink tables, so the memory a flood took is given back within
//! seconds of its keys being full. The task holds only weak references
//! and ends when the layer and its services are dropped.

use ratelimit_core::{Clock, Store};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the stores are maintained.
pub(crate) const UPKEEP_PERIOD: Duration = Duration::from_secs(1);

/// Starts the upkeep task of `stores` if a tokio runtime is running.
pub(crate) fn spawn<K, St>(stores: Vec<Weak<St>>, clock: Arc<dyn Clock>)
where
    St: Store<K>,
    K: ?Sized + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = clock.now();
            let mut alive = false;
            for store in &stores {
                if let Some(store) = store.upgrade() {
                    store.maintain(now);
                    alive = true;
                }
            }
            if !alive {
                return;
            }
        }
    });
}
