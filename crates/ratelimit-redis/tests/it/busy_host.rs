//! A busy host: the application's runtime saturated (its 2 worker threads
//! kept busy by a thousand tasks that spin and yield) does not push
//! Redis's answers past the timeout. The connections are driven on a
//! thread of their own; driven on the saturated runtime, a fresh answer
//! waited in the queue behind the busy tasks, and most checks timed out.

use crate::server;
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::{BreakerConfig, RedisStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tasks keeping the runtime busy: each spins 200 µs, then yields.
const BUSY: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_runtime_does_not_time_redis_out() {
    let server = server!();
    let store = RedisStore::builder(
        server.url(),
        Gcra::new(1_000_000, Duration::from_secs(1)).unwrap(),
    )
    // Five times the default: the driver thread shares 2 cores with
    // the busy workers and whatever else the machine runs.
    .timeout(Duration::from_millis(250))
    .breaker(BreakerConfig {
        failure_threshold: u32::MAX,
        cool_down: Duration::from_secs(1),
    })
    .build()
    .unwrap();
    store.ping().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..BUSY)
        .map(|_| {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_micros(200) {
                        std::hint::spin_loop();
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let checkers: Vec<_> = (0..8)
        .map(|c| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut failed = Vec::new();
                for i in 0..10 {
                    let key = format!("k{c}-{i}");
                    if let Err(e) = Store::<str>::check(&store, &key, 1, 0).await {
                        failed.push(e.to_string());
                    }
                }
                failed
            })
        })
        .collect();
    let mut failed = Vec::new();
    for c in checkers {
        failed.extend(c.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.await.unwrap();
    }
    assert!(
        failed.is_empty(),
        "{} of 80 failed: {failed:?}",
        failed.len()
    );
}
