//! Redis killed mid-load, restarted, or never there: the failure policy
//! holds, latency stays within the timeout and then near zero, and
//! limiting resumes.

use crate::server;
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::{BreakerConfig, BreakerState, RedisStore};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(50);
/// Generous: the machine is shared with builds.
const SLACK: Duration = Duration::from_millis(250);

fn store(url: String, fallback: bool, cool_down: Duration) -> RedisStore {
    let b = RedisStore::builder(url, Gcra::new(1_000_000, Duration::from_secs(1)).unwrap())
        .timeout(TIMEOUT)
        .breaker(BreakerConfig {
            failure_threshold: 3,
            cool_down,
        });
    if fallback {
        b.fallback_to_memory(10_000)
    } else {
        b
    }
    .build()
    .unwrap()
}

/// Polls `f` every few ms until it holds, or fails after `limit`.
async fn eventually(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_load_with_fallback_nothing_escapes() {
    let mut server = server!();
    let store = store(server.url(), true, Duration::from_secs(60));
    eventually(Duration::from_secs(5), "ping", async || {
        store.ping().await.is_ok()
    })
    .await;
    let done = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let slowest = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let origin = Instant::now();
    for t in 0..16 {
        let (store, done, checks, slowest) =
            (store.clone(), done.clone(), checks.clone(), slowest.clone());
        tasks.push(tokio::spawn(async move {
            let mut errors = 0;
            let key = format!("client-{t}");
            while !done.load(Ordering::Relaxed) {
                let start = Instant::now();
                // The fallback decides with the caller's clock.
                let now = origin.elapsed().as_nanos() as u64;
                if Store::<str>::check(&store, &key, 1, now).await.is_err() {
                    errors += 1;
                }
                slowest.fetch_max(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                checks.fetch_add(1, Ordering::Relaxed);
                // A real server awaits I/O between requests; without it,
                // tasks deciding in memory would never yield.
                tokio::task::yield_now().await;
            }
            errors
        }));
    }
    eventually(Duration::from_secs(10), "load running", async || {
        checks.load(Ordering::Relaxed) > 500
    })
    .await;
    server.kill();
    // The breaker opens quickly, the load goes on, in memory.
    eventually(Duration::from_secs(5), "breaker open", async || {
        store.breaker_state() == BreakerState::Open
    })
    .await;
    let at_open = checks.load(Ordering::Relaxed);
    eventually(Duration::from_secs(10), "load continues", async || {
        checks.load(Ordering::Relaxed) > at_open + 2000
    })
    .await;
    done.store(true, Ordering::Relaxed);
    for t in tasks {
        assert_eq!(t.await.unwrap(), 0, "an error escaped the fallback");
    }
    let slowest = Duration::from_micros(slowest.load(Ordering::Relaxed));
    assert!(slowest <= TIMEOUT + SLACK, "a check took {slowest:?}");

    // Breaker open: checks don't touch Redis, and are fast (the bounds
    // leave room for a loaded, shared machine).
    let mut took = Vec::new();
    for _ in 0..1000 {
        let start = Instant::now();
        assert!(Store::<str>::check(&store, "after", 1, 0).await.is_ok());
        took.push(start.elapsed());
    }
    took.sort();
    let (p99, worst) = (took[989], took[999]);
    assert!(p99 < Duration::from_millis(2), "open-breaker p99 {p99:?}");
    assert!(
        worst < Duration::from_millis(40),
        "open-breaker worst {worst:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fallback_errors_are_fast_and_clear() {
    let mut server = server!();
    let store = store(server.url(), false, Duration::from_secs(60));
    eventually(Duration::from_secs(5), "ping", async || {
        store.ping().await.is_ok()
    })
    .await;
    server.kill();
    let mut errors = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        let e = Store::<str>::check(&store, "k", 1, 0).await.unwrap_err();
        assert!(start.elapsed() <= TIMEOUT + SLACK, "{:?}", start.elapsed());
        assert!(e.is_unavailable(), "{e:?}");
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
        errors.push(e.to_string());
    }
    assert_eq!(store.breaker_state(), BreakerState::Open);
    assert!(
        errors.last().unwrap().contains("circuit breaker open"),
        "{errors:?}"
    );
    assert!(
        errors
            .first()
            .unwrap()
            .contains("rate-limit store unavailable ("),
        "{errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_redis_resumes_limiting_within_seconds() {
    let mut server = server!();
    // A longer timeout: a late answer must not be mistaken for a failure
    // while counting admissions on a loaded machine.
    let limited = RedisStore::builder(
        server.url(),
        Gcra::new(5, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_millis(500))
    .breaker(BreakerConfig {
        failure_threshold: 2,
        cool_down: Duration::from_millis(200),
    })
    .build()
    .unwrap();
    assert!(
        Store::<str>::check(&limited, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    server.kill();
    eventually(Duration::from_secs(5), "breaker open", async || {
        let _ = Store::<str>::check(&limited, "k", 1, 0).await;
        limited.breaker_state() == BreakerState::Open
    })
    .await;
    server.restart();
    let back = Instant::now();
    eventually(Duration::from_secs(5), "redis answers again", async || {
        Store::<str>::check(&limited, "k", 0, 0).await.is_ok()
    })
    .await;
    assert_eq!(limited.breaker_state(), BreakerState::Closed);
    eprintln!("limiting resumed {:?} after the restart", back.elapsed());
    // The new server starts empty: exactly 5 admitted, then denied.
    let mut admitted = 0;
    for _ in 0..8 {
        if Store::<str>::check(&limited, "k", 1, 0)
            .await
            .unwrap()
            .allowed
        {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_at_all_fails_open_through_the_fallback() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = store(
        format!("redis://127.0.0.1:{port}/"),
        true,
        Duration::from_secs(60),
    );
    for _ in 0..20 {
        let start = Instant::now();
        assert!(
            Store::<str>::check(&store, "k", 1, 0)
                .await
                .unwrap()
                .allowed
        );
        assert!(start.elapsed() <= TIMEOUT + SLACK);
    }
    assert_eq!(store.breaker_state(), BreakerState::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_redis_costs_one_timeout_then_nothing() {
    let server = server!();
    let store = store(server.url(), true, Duration::from_millis(300));
    eventually(Duration::from_secs(5), "ping", async || {
        store.ping().await.is_ok()
    })
    .await;
    server.signal("STOP");
    let mut took = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        assert!(
            Store::<str>::check(&store, "k", 1, 0)
                .await
                .unwrap()
                .allowed
        );
        took.push(start.elapsed());
    }
    server.signal("CONT");
    // The first three each wait out the timeout, then the breaker opens.
    for t in &took[..3] {
        assert!(
            *t >= TIMEOUT - Duration::from_millis(5) && *t <= TIMEOUT + SLACK,
            "{took:?}"
        );
    }
    let mut open = took[3..].to_vec();
    open.sort();
    assert!(open[open.len() / 2] < Duration::from_millis(2), "{took:?}");
    assert!(open[open.len() - 1] < Duration::from_millis(40), "{took:?}");
    eventually(Duration::from_secs(5), "breaker closes", async || {
        let _ = Store::<str>::check(&store, "k", 0, 0).await;
        store.breaker_state() == BreakerState::Closed
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_takes_calls_out_of_time_order() {
    // Requests read the clock before their Redis call; one that waited out
    // the timeout reaches the fallback after a later one that failed at
    // once. The sliding log must not see its time go back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = RedisStore::builder(
        format!("redis://127.0.0.1:{port}/"),
        ratelimit_core::SlidingLog::new(2, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(TIMEOUT)
    .fallback_to_memory(100)
    .build()
    .unwrap();
    let second = 1_000_000_000;
    let mut allowed = Vec::new();
    for now in [5 * second, 3 * second, 4 * second, second] {
        let d = Store::<str>::check(&store, "k", 1, now).await.unwrap();
        allowed.push(d.allowed);
    }
    assert_eq!(allowed, [true, true, false, false]);
    // Refunds out of order too.
    Store::<str>::refund(&store, "k", 1, 3 * second, 2 * second)
        .await
        .unwrap();
    assert!(
        !Store::<str>::check(&store, "k", 1, 6 * second)
            .await
            .unwrap()
            .allowed
    );
}
