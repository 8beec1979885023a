//! Helpers of the topology tests (Sentinel, Cluster): a bounded wait, an
//! alternating count, and a background load counting failed checks.

use ratelimit_core::Store;
use ratelimit_redis::RedisStore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

pub use crate::harness::until;

/// `n` cost-1 checks of `key`, alternately on `a` and `b`: how many were
/// admitted (a failed check panics).
pub async fn admitted_alternately(a: &RedisStore, b: &RedisStore, key: &str, n: usize) -> u64 {
    let mut admitted = 0;
    for i in 0..n {
        let s = if i % 2 == 0 { a } else { b };
        admitted += u64::from(Store::<str>::check(s, key, 1, 0).await.unwrap().allowed);
    }
    admitted
}

/// Checks running in the background on each store until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<(u64, u64)>>,
}

/// One task per store, checking keys `{prefix}-{i}` (64 of them, so every
/// Cluster node is touched) every 5 ms.
pub fn load(stores: Vec<RedisStore>, prefix: &str) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = stores
        .into_iter()
        .map(|s| {
            let stop = Arc::clone(&stop);
            let prefix = prefix.to_owned();
            tokio::spawn(async move {
                let (mut checks, mut errors) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("{prefix}-{}", checks % 64);
                    checks += 1;
                    if Store::<str>::check(&s, &key, 1, 0).await.is_err() {
                        errors += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (checks, errors)
            })
        })
        .collect();
    Load { stop, tasks }
}

impl Load {
    /// Stops it: the checks made, and how many failed.
    pub async fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = (0, 0);
        for t in self.tasks {
            let (c, e) = t.await.unwrap();
            total = (total.0 + c, total.1 + e);
        }
        total
    }
}
