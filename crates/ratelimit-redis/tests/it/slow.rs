//! A slow Redis: latency under the timeout is never a failure (the first
//! check included), and what a timeout does to exactness, bounded.

use crate::harness::Client;
use crate::server;
use ratelimit_core::{SlidingLog, Store};
use ratelimit_redis::{BreakerConfig, BreakerState, RedisStore};
use ratelimit_test_support::DelayProxy;
use std::time::{Duration, Instant};

/// One way through the proxy: a round trip costs 300 ms.
const ONE_WAY: Duration = Duration::from_millis(150);
/// Above one round trip (400 ms to spare on a loaded machine), below the
/// three a connect, a script load and a check took together.
const TIMEOUT: Duration = Duration::from_millis(700);

fn slow_store(url: String) -> RedisStore {
    RedisStore::builder(
        url,
        SlidingLog::new(1_000, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(TIMEOUT)
    .connect_timeout(Duration::from_secs(5))
    // Any failure opens it.
    .breaker(BreakerConfig {
        failure_threshold: 1,
        cool_down: Duration::from_secs(3600),
    })
    .build()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_stores_first_check_is_decided_by_redis() {
    let server = server!();
    // Direct, with a short timeout: the connect and the script load are
    // not charged to it.
    let direct = RedisStore::builder(
        server.url(),
        SlidingLog::new(2, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_millis(25))
    .build()
    .unwrap();
    let d = Store::<str>::check(&direct, "fresh", 1, 0).await.unwrap();
    assert_eq!((d.allowed, d.remaining), (true, 1));
    // Through a 300 ms round trip: one round trip, within the timeout.
    let proxy = DelayProxy::start(server.port, ONE_WAY);
    let store = slow_store(proxy.url());
    let start = Instant::now();
    let d = Store::<str>::check(&store, "fresh", 1, 0).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 999);
    assert_eq!(store.breaker_state(), BreakerState::Closed);
    eprintln!("first check through the proxy: {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_under_the_timeout_never_opens_the_breaker() {
    let server = server!();
    let proxy = DelayProxy::start(server.port, ONE_WAY);
    let store = slow_store(proxy.url());
    // 64 clients at once from the start (the connect in flight), 5
    // checks each: every one decided by Redis (no fallback: a failure
    // would be an error), and the breaker (threshold 1) stays closed.
    let mut tasks = Vec::new();
    for t in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                let key = format!("client-{}", (t + i) % 16);
                Store::<str>::check(&store, &key, 1, 0)
                    .await
                    .unwrap_or_else(|e| panic!("task {t}, check {i}: {e}"));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(store.breaker_state(), BreakerState::Closed);
    // 320 checks of 16 keys, 20 each: all counted in Redis.
    let d = Store::<str>::check(&store, "client-0", 0, 0).await.unwrap();
    assert_eq!(d.remaining, 1_000 - 20);
}

/// A check that times out while Redis holds it (`CLIENT PAUSE`) is
/// decided by the fallback, and still applied by Redis afterwards: it
/// counts against the key there, so the fleet admits no more than the
/// limit in Redis plus what the fallback admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_check_still_counts_in_redis() {
    let server = server!();
    let store = RedisStore::builder(
        server.url(),
        SlidingLog::new(3, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_millis(100))
    .fallback_to_memory(100)
    .build()
    .unwrap();
    crate::harness::again(|| store.ping()).await;
    let mut admin = server.client().await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1_000)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let start = Instant::now();
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(d.allowed, "the fallback admits it");
    assert!(start.elapsed() < Duration::from_millis(900), "it timed out");
    // The pause ends (held commands then run) by itself: a command of
    // ours would be held too.
    tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(start.elapsed())).await;
    // Redis ran the check once unpaused: 2 of 3 left there.
    let mut admitted = 1;
    for _ in 0..5 {
        let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
        admitted += u64::from(d.allowed);
    }
    assert_eq!(admitted, 3, "1 in the fallback, counted in Redis too, + 2");
    assert_eq!(store.breaker_state(), BreakerState::Closed);
}

/// With the outage share off, while Redis gives no decisions, each of `k`
/// instances admits up to the limit `L` in its own fallback, on top of
/// what Redis admitted in the window: at most `(k + 1) * L` per window,
/// reached exactly here (`outage_share.rs`: the share, on by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_admits_at_most_the_limit_per_instance() {
    const L: u64 = 3;
    let mut server = server!();
    let build = || {
        RedisStore::builder(
            server.url(),
            SlidingLog::new(L, Duration::from_secs(3600)).unwrap(),
        )
        .timeout(Duration::from_millis(200))
        .fallback_to_memory(100)
        .outage_share(false)
        .build()
        .unwrap()
    };
    let instances = [build(), build()];
    let mut admitted = 0;
    for (i, store) in instances.iter().enumerate() {
        crate::harness::again(|| store.ping()).await;
        // Instance 0 uses 2 of the 3 in Redis, instance 1 the third.
        for _ in 0..(2 - i) {
            admitted += u64::from(Store::<str>::check(store, "k", 1, 1).await.unwrap().allowed);
        }
    }
    assert_eq!(admitted, L);
    server.kill();
    for store in &instances {
        let mut own = 0;
        for _ in 0..2 * L {
            own += u64::from(Store::<str>::check(store, "k", 1, 2).await.unwrap().allowed);
        }
        assert_eq!(own, L, "each fallback counts on its own, from empty");
        admitted += own;
    }
    let k = instances.len() as u64;
    assert_eq!(admitted, (k + 1) * L, "the bound, and no more");
}
