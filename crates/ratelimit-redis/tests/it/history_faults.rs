//! Histories under faults: 16 tasks on store instances check keys while
//! Redis is paused, loses its data, or (feature `cluster`) loses a
//! master; what each key admitted stays within ALGORITHMS.md's bound for
//! that mode ("Bounds per mode"), the largest overshoot is reported, and
//! once Redis decides again the histories are linearizable.

use crate::harness::{until, Client as _};
use crate::history::{call, hourly_with_fallback, run, Plan, ONE_INSTANT, SECOND, T0};
use crate::server;
use ratelimit_core::{FixedWindow, Store};
use ratelimit_redis::{RedisStore, StoreState, TimeSource};
use ratelimit_test_support::history::{admitted_cost, Event, Op};
use std::time::{Duration, Instant};

/// The keys of `plan` (`run`'s: `seed * 1000 + 0..8`).
fn keys(plan: Plan) -> impl Iterator<Item = u64> {
    (0..8).map(move |k| plan.seed * 1_000 + k)
}

/// The largest cost any key of `events` admitted, each at most `bound`.
fn most_admitted(events: &[Event<u64>], bound: u64, what: &str) -> u64 {
    let admitted = admitted_cost(events);
    for (key, &n) in &admitted {
        assert!(n <= bound, "{what}: key {key} admitted {n} > {bound}");
    }
    admitted.into_values().max().unwrap_or(0)
}

/// Waits (at most 60 s) until every store decides in Redis again, each
/// peeking a key (cost 0: it takes nothing) to let its breaker close.
async fn until_in_redis(stores: &[RedisStore]) {
    until(
        Duration::from_secs(60),
        "every store decides in Redis",
        || async {
            for s in stores {
                Store::<str>::check(s, "probe", 0, T0).await.unwrap();
            }
            stores.iter().all(|s| s.state() == StoreState::Redis)
        },
    )
    .await;
}

/// The outage share: three instances (`k = 3`) of a limit of 6 spend
/// their keys in Redis, then the server is paused (SIGSTOP) and 16 tasks
/// check those keys and fresh ones: each instance's fallback admits its
/// share, 2, so the fleet admits at most `L + max(L, k)` = 12 in the
/// window, on top of Redis's `L` (without the share it would be 24). The
/// fresh keys, spent again once Redis answers, stay within it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_admits_within_the_outage_share() {
    let server = server!();
    let (limit, k) = (6, 3);
    let fleet: Vec<_> = (0..k)
        .map(|_| hourly_with_fallback(server.url(), "p:", limit, true))
        .collect();
    for s in &fleet {
        s.ping().await.unwrap();
    }
    crate::outage_share::until_counted(&fleet, k).await;
    let (spent, fresh) = (
        ONE_INSTANT,
        Plan {
            seed: 1,
            ..ONE_INSTANT
        },
    );
    let mut events = run(&fleet, spent).await;
    let started = Instant::now();
    server.signal("STOP");
    events.extend(run(&fleet, spent).await);
    events.extend(run(&fleet, fresh).await);
    server.signal("CONT");
    let paused = started.elapsed();
    until_in_redis(&fleet).await;
    events.extend(run(&fleet, fresh).await);
    let bound = limit + limit.max(k);
    let most = most_admitted(&events, bound, "outage share");
    eprintln!(
        "pause of {paused:?}, {k} instances sharing, limit {limit}: at most {most} a key (bound {bound})"
    );
}

/// A fixed window of `limit` per hour, the caller's time, no fallback,
/// no deny cache: every check reaches Redis.
fn hourly(url: &str, limit: u64) -> RedisStore {
    let hour = FixedWindow::new(limit, Duration::from_secs(3600)).unwrap();
    RedisStore::builder(url, hour)
        .prefix("d:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .deny_cache(0)
        .build()
        .unwrap()
}

/// Redis losing its data (`FLUSHALL`) under two instances holding keys
/// at their limit (plan 0) and keys banned for 4 hours (plan 1): each
/// held key admits at most `L` before the write-back (ALGORITHMS.md,
/// "Redis losing its data"), which Redis admitting a held key starts at
/// once (no upkeep here); then the bans are back, and refuse their keys
/// in the next window too, on both instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_under_load_admits_at_most_the_limit_then_the_bans_hold() {
    let server = server!();
    let limit = 5;
    let both = [0, 1].map(|_| hourly(&server.url(), limit));
    let (spent, banned) = (
        ONE_INSTANT,
        Plan {
            seed: 1,
            ..ONE_INSTANT
        },
    );
    run(&both, spent).await;
    let ban = Op::Ban(4 * 3600 * SECOND);
    for key in keys(banned) {
        call(&both[0], key, ban, T0).await;
        // The other instance holds it from Redis's answer.
        assert!(call(&both[1], key, Op::Check(1), T0).await.unwrap().banned);
    }
    // Each reads the marker: its reference. An admission of a held key
    // reads it again at once, at most every 100 ms: past that here.
    for s in &both {
        assert_eq!(s.write_back(T0).await.unwrap(), 0);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = server.client().await;
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    let mut events = run(&both, spent).await;
    events.extend(run(&both, banned).await);
    let most = most_admitted(&events, limit, "after the loss");
    // Until the bans are back (what is left of each, read only).
    let next_window = T0 + 3600 * SECOND;
    until(Duration::from_secs(10), "the bans written back", || async {
        let mut back = true;
        for key in keys(banned) {
            let left = Store::<str>::ban_left(&both[1], &format!("h{key}"), next_window);
            back &= left.await.unwrap().is_some();
        }
        back
    })
    .await;
    let after = run(
        &both,
        Plan {
            t0: next_window,
            ..banned
        },
    )
    .await;
    // Peeks (cost 0) are admitted, banned or not.
    for e in after.iter().filter(|e| e.op != Op::Check(0)) {
        let seen = e.answer.unwrap();
        assert!(!seen.allowed && seen.banned, "key {}: {seen:?}", e.key);
    }
    eprintln!("loss under load, 2 instances, limit {limit}: at most {most} a held key admitted, then banned");
}

/// A Cluster master killed (SIGKILL) while 16 tasks on two instances with
/// fallbacks (a limit of 5 an hour, no share) check keys spent in Redis:
/// what each key admits stays within the failover's bound, the
/// fallback's `(k + 1) * L` plus one `L` of writes lost with the old
/// master (ALGORITHMS.md, "Bounds per mode"); once a replica has taken
/// over and both decide in the Cluster on every slot tried, the
/// histories are linearizable again.
#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_kill_stays_within_the_failover_bound() {
    let Some(mut cluster) = ratelimit_test_support::RedisCluster::start(3, 1) else {
        return;
    };
    let target = ratelimit_redis::Target::parse(&cluster.url(), None).unwrap();
    let (limit, k) = (5, 2);
    let both = [0, 1].map(|_| hourly_with_fallback(target.clone(), "c:", limit, false));
    let mut events = run(&both, ONE_INSTANT).await;
    let load = {
        let both = both.clone();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut events = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Acquire) {
                events.extend(run(&both, ONE_INSTANT).await);
            }
            events
        });
        (stop, task)
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::task::block_in_place(|| cluster.kill_a_master());
    let killed = Instant::now();
    settle(&cluster, &target, &both).await;
    let back = killed.elapsed();
    load.0.store(true, std::sync::atomic::Ordering::Release);
    events.extend(load.1.await.unwrap());
    let bound = (k + 2) * limit;
    let most = most_admitted(&events, bound, "cluster master kill");
    eprintln!(
        "cluster master kill, {k} instances, limit {limit}: at most {most} a key (bound {bound}), both in the cluster after {back:?}"
    );
    crate::history::linearizable_after(&both, limit, "after the master kill").await;
}

/// Waits until a replica has taken over and both stores decide in the
/// Cluster on 16 fresh keys each.
#[cfg(feature = "cluster")]
async fn settle(
    cluster: &ratelimit_test_support::RedisCluster,
    target: &ratelimit_redis::Target,
    both: &[RedisStore; 2],
) {
    let what = "a replica took over, the cluster ok";
    until(Duration::from_secs(60), what, || async {
        tokio::task::block_in_place(|| cluster.ok() && cluster.masters() == 3)
    })
    .await;
    until_in_redis(both).await;
    let conn = target.connect().await.unwrap();
    let mut round = 0;
    let what = "both stores decide in the cluster on every slot";
    until(Duration::from_secs(60), what, || {
        round += 1;
        let mut conn = conn.clone();
        async move {
            for k in 0..16 {
                for (i, s) in both.iter().enumerate() {
                    let key = format!("probe-{round}-{k}-{i}");
                    if !crate::cluster::decided_in(s, &key, &mut conn).await {
                        return false;
                    }
                }
            }
            true
        }
    })
    .await;
}
