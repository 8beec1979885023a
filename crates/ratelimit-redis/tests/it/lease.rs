//! Local leases: hot keys cost a round trip per `n` requests, and the
//! error they bring stays within the documented bound (`k * (n - 1)` per
//! window for `k` instances and leases of `n`).

use crate::server;
use ratelimit_core::{FixedWindow, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const P: u64 = 10_000_000_000;
/// A whole number of windows since the epoch: a window starts here.
const T0: u64 = 170_000_000 * P;

fn leased(url: String, n: u64) -> RedisStore {
    RedisStore::builder(url, FixedWindow::new(20, Duration::from_nanos(P)).unwrap())
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .lease(n, Duration::from_secs(3600))
        .build()
        .unwrap()
}

async fn admitted(s: &RedisStore, key: &str, now: u64) -> bool {
    Store::<str>::check(s, key, 1, now).await.unwrap().allowed
}

async fn left(url: String, key: &str, now: u64) -> u64 {
    let probe = leased(url, 0);
    Store::<str>::check(&probe, key, 0, now)
        .await
        .unwrap()
        .remaining
}

/// One round trip per lease: 20 requests of a hot key, 2 round trips.
#[tokio::test]
async fn a_hot_key_costs_one_round_trip_per_lease() {
    let server = server!();
    let mut admin = server.client().await;
    let store = leased(server.url(), 10);
    for i in 0..20 {
        assert!(admitted(&store, "hot", T0 + i).await, "request {i}");
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    let calls = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|l| l.split(',').next())
        .unwrap();
    assert_eq!(calls, "2", "{info}");
    // The limit holds: no 21st.
    assert!(!admitted(&store, "hot", T0 + 21).await);
}

/// Two instances, leases of 10, a window of 20: both take a lease at the
/// end of one window (counted there) and spend it in the next, which also
/// admits its own 20. The next window sees 20 + 2 * 9 = 38 requests: the
/// documented worst case `L + k * (n - 1)`, reached and not exceeded.
#[tokio::test]
async fn over_admission_stays_within_k_times_n_minus_1() {
    let server = server!();
    let (a, b) = (leased(server.url(), 10), leased(server.url(), 10));
    let end = T0 + P - 1;
    assert!(admitted(&a, "k", end).await);
    assert!(admitted(&b, "k", end).await);
    let mut next_window = 0u64;
    for i in 0..100 {
        let now = T0 + P + i;
        next_window += u64::from(admitted(&a, "k", now).await);
        next_window += u64::from(admitted(&b, "k", now).await);
    }
    let (l, k, n) = (20, 2, 10);
    assert_eq!(next_window, l + k * (n - 1));
}

/// An idle instance's lease holds `n - 1` units away from the others until
/// it is given back; given back, they are there again.
#[tokio::test]
async fn unspent_units_go_back() {
    let server = server!();
    let (a, b) = (leased(server.url(), 10), leased(server.url(), 0));
    assert!(admitted(&a, "k", T0).await);
    assert_eq!(
        left(server.url(), "k", T0 + 1).await,
        10,
        "9 held by a's lease"
    );
    let mut others = 0;
    for i in 0..30 {
        others += u64::from(admitted(&b, "k", T0 + 2 + i).await);
    }
    assert_eq!(others, 10, "the missing units are the lease's n - 1 = 9");
    a.release_leases().await;
    // 20 - 1 spent by a - 10 by b.
    assert_eq!(left(server.url(), "k", T0 + 40).await, 9, "given back");
}

/// An expired lease is given back at the key's next check (in a task).
#[tokio::test]
async fn an_expired_lease_is_given_back() {
    let server = server!();
    let store = RedisStore::builder(
        server.url(),
        FixedWindow::new(20, Duration::from_nanos(P)).unwrap(),
    )
    .time_source(TimeSource::Caller)
    .timeout(Duration::from_secs(5))
    .lease(10, Duration::from_millis(100))
    .build()
    .unwrap();
    assert!(admitted(&store, "k", T0).await);
    assert_eq!(left(server.url(), "k", T0).await, 10);
    // 200 ms later (caller time), the lease has expired: its 9 go back and
    // a new lease of 10 is taken: 20 - 1 - 10 = 9 left.
    assert!(admitted(&store, "k", T0 + 200_000_000).await);
    let mut seen = 0;
    for _ in 0..1_000 {
        seen = left(server.url(), "k", T0 + 200_000_001).await;
        if seen == 9 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(seen, 9);
}
