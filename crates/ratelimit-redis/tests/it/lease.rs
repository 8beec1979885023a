//! Local leases: hot keys cost a round trip per `n` requests, and the
//! error they bring stays within the documented bound (`k * (n - 1)` per
//! window for `k` instances and leases of `n`). A key takes a lease at its
//! second check within the lease's lifetime.

use crate::harness::Client as _;
use crate::server;
use ratelimit_core::{FixedWindow, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const P: u64 = 10_000_000_000;
/// A whole number of windows since the epoch: a window starts here.
const T0: u64 = 170_000_000 * P;

/// A store with leases of `n` units, or none for `n` = 0.
fn leased(url: String, limit: u64, n: u64, ttl: Duration) -> RedisStore {
    let builder = RedisStore::builder(
        url,
        FixedWindow::new(limit, Duration::from_nanos(P)).unwrap(),
    )
    .time_source(TimeSource::Caller)
    .timeout(Duration::from_secs(5));
    match n {
        0 => builder,
        n => builder.lease(n, ttl),
    }
    .build()
    .unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

async fn admitted(s: &RedisStore, key: &str, now: u64) -> bool {
    Store::<str>::check(s, key, 1, now).await.unwrap().allowed
}

/// What Redis has left for `key` (a peek from a store without leases).
async fn left(url: String, key: &str, now: u64) -> u64 {
    let probe = leased(url, 20, 0, HOUR);
    Store::<str>::check(&probe, key, 0, now)
        .await
        .unwrap()
        .remaining
}

/// 20 requests of a hot key: its first check, a lease of 10, a lease of 10
/// refused (9 left), a lease of 9. Then the denials: a refused lease, the
/// check that denies, and the deny cache for the rest.
#[tokio::test]
async fn a_hot_key_costs_one_round_trip_per_lease() {
    let server = server!();
    let mut admin = server.client().await;
    let store = leased(server.url(), 20, 10, HOUR);
    for i in 0..20 {
        assert!(admitted(&store, "hot", T0 + i).await, "request {i}");
    }
    assert_eq!(crate::harness::round_trips(&mut admin).await, 4);
    for i in 0..100 {
        assert!(!admitted(&store, "hot", T0 + 20 + i).await);
    }
    assert_eq!(crate::harness::round_trips(&mut admin).await, 6);
}

/// Two instances, leases of 10, a window of 40: both take a lease at the
/// end of one window (counted there) and spend it in the next, which also
/// admits its own 40. The next window sees 40 + 2 * 9 = 58 requests: the
/// documented worst case `L + k * (n - 1)`, reached and not exceeded.
#[tokio::test]
async fn over_admission_stays_within_k_times_n_minus_1() {
    let server = server!();
    let a = leased(server.url(), 40, 10, HOUR);
    let b = leased(server.url(), 40, 10, HOUR);
    let end = T0 + P - 1;
    for s in [&a, &b] {
        assert!(admitted(s, "k", end - 1).await);
        assert!(admitted(s, "k", end).await, "takes a lease");
    }
    let mut next_window = 0u64;
    for i in 0..100 {
        let now = T0 + P + i;
        next_window += u64::from(admitted(&a, "k", now).await);
        next_window += u64::from(admitted(&b, "k", now).await);
    }
    let (l, k, n) = (40, 2, 10);
    assert_eq!(next_window, l + k * (n - 1));
}

/// An idle instance's lease holds `n - 1` units away from the others until
/// it is given back; given back, they are there again.
#[tokio::test]
async fn unspent_units_go_back() {
    let server = server!();
    let a = leased(server.url(), 20, 10, HOUR);
    let b = leased(server.url(), 20, 0, HOUR);
    assert!(admitted(&a, "k", T0).await);
    assert!(admitted(&a, "k", T0).await, "takes a lease");
    assert_eq!(
        left(server.url(), "k", T0 + 1).await,
        9,
        "9 held by a's lease"
    );
    let mut others = 0;
    for i in 0..30 {
        others += u64::from(admitted(&b, "k", T0 + 2 + i).await);
    }
    assert_eq!(others, 9, "the lease's n - 1 = 9 are missing");
    a.release_leases().await;
    assert_eq!(left(server.url(), "k", T0 + 40).await, 9, "given back");
}

/// An expired lease is given back at the key's next check, before the
/// next lease is taken.
#[tokio::test]
async fn an_expired_lease_is_given_back() {
    let server = server!();
    let store = leased(server.url(), 20, 10, Duration::from_millis(100));
    assert!(admitted(&store, "k", T0).await);
    assert!(admitted(&store, "k", T0 + 1).await);
    assert_eq!(left(server.url(), "k", T0 + 2).await, 9);
    // 200 ms later (caller time), the lease has expired: its 9 go back and
    // a new lease of 10 is taken: 20 - 2 - 10 = 8 left.
    assert!(admitted(&store, "k", T0 + 200_000_000).await);
    assert_eq!(left(server.url(), "k", T0 + 200_000_001).await, 8);
}
