//! A live store's in-memory fallback keeps each key's used quota across
//! changes of the settings (reloads), as a memory store does: a reload
//! while Redis is away starts nothing afresh, however many come.

use crate::live::{spec, T0};
use crate::server;
use ratelimit_core::{Decision, LiveAlgorithm, MemoryStore, Store};
use ratelimit_redis::{LiveRedis, TimeSource};
use std::time::Duration;

const MIN: u64 = 60_000_000_000;

/// A live store on `url` that falls back to memory after `timeout`.
fn store(url: &str, live: &LiveAlgorithm, timeout: Duration) -> LiveRedis {
    LiveRedis::builder(url, live)
        .prefix("fb:")
        .time_source(TimeSource::Caller)
        .timeout(timeout)
        .fallback_to_memory(1_000)
        .build()
        .unwrap()
}

async fn check(store: &LiveRedis, key: &str, now: u64) -> Decision {
    store.store_for(key).check(key, 1, now).await.unwrap()
}

/// Two accounts made through Redis, then Redis paused (SIGSTOP), and five
/// reloads (the period moved back and forth, and one reload to the same
/// settings) each followed by three tries: at most the outage bound for
/// one instance, `2 * L` = 4, in all. A fallback started afresh at each
/// reload admitted 2 more each time (14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_reloads_while_redis_is_paused_admit_at_most_the_outage_bound() {
    let server = server!();
    let live = LiveAlgorithm::new(spec("sliding-log 2/1d"));
    let store = store(&server.url(), &live, Duration::from_millis(100));
    let mut now = T0;
    let mut admitted = 0;
    for _ in 0..3 {
        admitted += u64::from(check(&store, "203.0.113.7", now).await.allowed);
    }
    assert_eq!(admitted, 2, "through redis");
    server.signal("STOP");
    let settings = [
        "sliding-log 2/2d",
        "sliding-log 2/1d",
        "sliding-log 2/1d",
        "sliding-log 2/2d",
        "sliding-log 2/1d",
    ];
    for setting in settings {
        now += MIN;
        live.set(spec(setting));
        for _ in 0..3 {
            admitted += u64::from(check(&store, "203.0.113.7", now).await.allowed);
        }
    }
    server.signal("CONT");
    assert!(admitted <= 4, "{admitted} admitted");
    // The fallback did count: it admitted the outage's share.
    assert_eq!(admitted, 4);
}

/// With Redis unreachable from the start, every change (2 -> 3 -> 2, an
/// override given and taken away, a change to the same settings) is
/// decided in the fallback exactly as in a memory store of the same live
/// settings, decision for decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_carries_over_as_memory_does() {
    let live = LiveAlgorithm::new(spec("sliding-log 2/1d"));
    let memory = MemoryStore::<LiveAlgorithm, String>::new(live.clone());
    // Nothing listens on port 1.
    let store = store("redis://127.0.0.1:1/", &live, Duration::from_millis(50));
    let keys = ["a", "b"];
    let mut now = T0;
    let steps: [&dyn Fn(); 6] = [
        &|| {},
        &|| live.set(spec("sliding-log 3/1d")),
        &|| live.set(spec("sliding-log 2/1d")),
        &|| live.set_override("b", spec("sliding-log 5/1d")).unwrap(),
        &|| live.set(spec("sliding-log 2/1d")),
        &|| assert!(live.remove_override("b")),
    ];
    let mut admitted = 0;
    for (i, step) in steps.iter().enumerate() {
        step();
        now += MIN;
        for key in keys {
            for _ in 0..3 {
                let m = memory.check(key, 1, now).value().unwrap();
                let r = check(&store, key, now).await;
                assert_eq!(
                    (r.allowed, r.remaining),
                    (m.allowed, m.remaining),
                    "step {i}, {key}"
                );
                admitted += u64::from(r.allowed && key == "a");
            }
        }
    }
    // 2, then 1 more of 3, then nothing: a change frees nothing.
    assert_eq!(admitted, 3);
    let counts = store.counts().unwrap();
    assert_eq!(counts.keys, 2, "{counts:?}");
}
