//! Reloads on a real redis-server grant nothing: a limit lowered and
//! raised back, over and over, keeps what each key used (its overshoot
//! too), for all six algorithms and across kinds, decision for decision
//! as in memory; and reloads that change nothing make no version and
//! touch no key, whether the key is checked between them or idle.

use crate::live::{check, live_store, spec, T0};
use crate::server;
use ratelimit_core::{LiveAlgorithm, MemoryStore, Store};

const MIN: u64 = 60_000_000_000;

/// Each pair: the larger setting, then the smaller one, cycled.
const CYCLES: &[[&str; 2]] = &[
    ["gcra 3/1d", "gcra 2/1d"],
    ["token-bucket 3 refill 3/1d", "token-bucket 2 refill 3/1d"],
    ["leaky-bucket 1/1d queue 2", "leaky-bucket 1/1d queue 1"],
    ["fixed-window 3/1d", "fixed-window 2/1d"],
    [
        "fixed-window 3/1d anchor first-request",
        "fixed-window 2/1h anchor first-request",
    ],
    ["sliding-log 3/1d", "sliding-log 2/1d"],
    ["sliding-log 3/1d", "sliding-log 3/1h"],
    ["sliding-window 3/1d", "sliding-window 2/1d"],
    ["sliding-window 3/1d", "sliding-window 2/2d"],
    ["gcra 3/1d", "fixed-window 2/1d"],
    ["sliding-log 3/1d", "gcra 1/1d"],
    ["fixed-window 3/1d", "sliding-window 1/1d"],
    ["leaky-bucket 1/1d queue 2", "sliding-log 2/1d"],
];

/// 3 used of the larger setting; then 25 cycles down and back up, a
/// minute apart (inside the shortest period, 1 h): not one more request
/// is admitted, in Redis or memory,
/// and every decision is the same in both.
#[tokio::test]
async fn shrink_and_grow_cycles_grant_nothing_in_redis() {
    let server = server!();
    for (i, [big, small]) in CYCLES.iter().enumerate() {
        let live = LiveAlgorithm::new(spec(big));
        let memory = MemoryStore::<LiveAlgorithm, String>::new(live.clone());
        let redis = live_store(&server.url(), &format!("cycle{i}:"), &live);
        let mut now = T0;
        let first = check(&redis, "k", 3, now).await;
        assert!(first.allowed, "{big}");
        memory.check("k", 3, now).value().unwrap();
        for cycle in 0..25 {
            for setting in [small, big] {
                now += MIN;
                live.set(spec(setting));
                let m = memory.check("k", 1, now).value().unwrap();
                let r = check(&redis, "k", 1, now).await;
                assert_eq!(r, m, "{setting} (cycle {cycle} of {big} / {small})");
                assert!(
                    !r.allowed && r.remaining == 0,
                    "{setting}, cycle {cycle}: {r:?}"
                );
            }
        }
    }
}

/// 100 reloads of unchanged settings: no new version, and a key used up
/// stays used up, in Redis; a key idle through 100 reloads that do change
/// the settings back and forth still carries what it used.
#[tokio::test]
async fn unchanged_reloads_grant_nothing_in_redis() {
    let server = server!();
    for (i, setting) in ["gcra 3/1d", "fixed-window 3/1d", "sliding-log 3/1d"]
        .iter()
        .enumerate()
    {
        let live = LiveAlgorithm::new(spec(setting));
        live.set_override("vip", spec("gcra 9/1d")).unwrap();
        let redis = live_store(&server.url(), &format!("same{i}:"), &live);
        for key in ["k", "idle", "vip"] {
            assert!(check(&redis, key, 3, T0).await.allowed, "{setting} {key}");
        }
        let (version, _) = live.algorithm_for("k");
        for _ in 0..100 {
            live.set(spec(setting));
            live.replace::<str>(spec(setting), &[("vip", spec("gcra 9/1d"))])
                .unwrap();
            live.set_override("vip", spec("gcra 9/1d")).unwrap();
            assert!(!check(&redis, "k", 1, T0).await.allowed, "{setting}");
        }
        assert_eq!(
            live.algorithm_for("k").0,
            version,
            "{setting}: no new version"
        );
        assert_eq!(check(&redis, "vip", 0, T0).await.remaining, 6, "{setting}");
        for j in 0..100 {
            live.set(spec(if j % 2 == 0 { "gcra 4/1d" } else { setting }));
        }
        let d = check(&redis, "idle", 1, T0).await;
        assert!(!d.allowed && d.remaining == 0, "{setting}: {d:?}");
    }
}
