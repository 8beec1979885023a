//! Redis losing its data (a restart without persistence, `FLUSHALL`):
//! the bans and denials the instances hold are written back, and what a
//! loss can grant stays within ALGORITHMS.md's bound ("Redis losing its
//! data").

use crate::ban::check;
use crate::harness::{again, Client};
use crate::server;
use ratelimit_core::{AnyAlgorithm, BanPolicy, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;
/// A real epoch time, on no whole second.
const T0: u64 = 1_700_000_000_123_456_789;

/// An instance: `deny` keys in its deny cache.
fn store(
    url: &str,
    spec: &str,
    ban: Option<BanPolicy>,
    deny: usize,
    time: TimeSource,
) -> RedisStore {
    RedisStore::builder(url, spec.parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .time_source(time)
        .timeout(Duration::from_secs(5))
        .deny_cache(deny)
        .ban(ban)
        .build()
        .unwrap()
}

/// Two instances of one fleet: `a` with a deny cache, `b` without.
fn fleet(
    url: &str,
    spec: &str,
    ban: Option<BanPolicy>,
    time: TimeSource,
) -> (RedisStore, RedisStore) {
    (
        store(url, spec, ban, 1024, time),
        store(url, spec, ban, 0, time),
    )
}

async fn write_back(s: &RedisStore, now: u64) -> usize {
    again(|| s.write_back(now)).await
}

async fn flushall(server: &crate::harness::RedisServer) {
    let mut c = server.client().await;
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
}

/// The attack on the axum example: 5 logins an hour per IP, then a ban of
/// an hour; Redis restarted empty. The ban is written back by the
/// instance that holds it, and refuses the key on every instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_survives_an_empty_restart() {
    let mut server = server!();
    let url = server.url();
    let ban = BanPolicy::new(Duration::from_secs(3600)).unwrap();
    let (a, b) = fleet(&url, "fixed-window 5/1h", Some(ban), TimeSource::Redis);
    for _ in 0..5 {
        assert!(check(&b, "ip", 0).await.allowed);
    }
    assert!(check(&a, "ip", 0).await.banned);
    // a reads the marker: nothing lost yet.
    assert_eq!(write_back(&a, 0).await, 0);
    server.restart();
    assert_eq!(write_back(&a, 0).await, 1, "the ban written back");
    let lower = Duration::from_secs(3600 - 60);
    for s in [&b, &a] {
        let d = again(|| Store::<str>::check(s, "ip", 1, 0)).await;
        assert!(d.banned && !d.allowed, "{d:?}");
        let wait = d.wait.unwrap();
        assert!(
            wait > lower && wait <= Duration::from_secs(3600),
            "{wait:?}"
        );
    }
    // A new instance, which never saw the key, refuses it too.
    let c = store(&url, "fixed-window 5/1h", Some(ban), 0, TimeSource::Redis);
    assert!(again(|| Store::<str>::check(&c, "ip", 1, 0)).await.banned);
    // And b, which does not hold the ban, wrote nothing (it read the new
    // marker only now).
    assert_eq!(write_back(&b, 0).await, 0);
}

/// Two instances holding one ban write it back once: the second finds it
/// there and leaves its end as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_write_one_ban_back_without_extending_it() {
    let server = server!();
    let url = server.url();
    let (a, b) = fleet(&url, "gcra 10/1s", None, TimeSource::Caller);
    Store::<str>::ban(&a, "k", Duration::from_secs(60), T0)
        .await
        .unwrap();
    // b holds it from Redis's answer.
    assert!(check(&b, "k", T0 + SEC).await.banned);
    assert_eq!(write_back(&a, T0 + SEC).await, 0);
    assert_eq!(write_back(&b, T0 + SEC).await, 0);
    flushall(&server).await;
    assert_eq!(write_back(&a, T0 + 2 * SEC).await, 1);
    assert_eq!(write_back(&b, T0 + 3 * SEC).await, 0, "already there");
    // Once more: the marker is the one read, nothing to do.
    assert_eq!(write_back(&a, T0 + 4 * SEC).await, 0);
    let left = Store::<str>::ban_left(&b, "k", T0 + 10 * SEC)
        .await
        .unwrap();
    assert_eq!(left, Some(Duration::from_secs(50)), "not extended");
    let d = check(&b, "k", T0 + 10 * SEC).await;
    assert!(d.banned && d.wait == Some(Duration::from_secs(50)), "{d:?}");
    // The ban ends at its instant.
    assert!(check(&b, "k", T0 + 60 * SEC).await.allowed);
}

/// A key denied at its limit (no ban), or admitted with nothing left,
/// stays refused after a `FLUSHALL` until its known instant, on an
/// instance that never saw it so; a key with quota left when Redis lost it
/// starts empty (one more `L`, the documented bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_stays_until_its_instant_and_a_loss_grants_at_most_one_more_limit() {
    let server = server!();
    let url = server.url();
    const L: usize = 3;
    let (a, b) = fleet(&url, "fixed-window 3/1d", None, TimeSource::Caller);
    let t = T0;
    let keys = ["denied", "full", "partly"];
    for (key, used) in keys.into_iter().zip([L, L, L - 1]) {
        for _ in 0..used {
            assert!(check(&b, key, t).await.allowed);
        }
    }
    let denial = check(&a, "denied", t).await;
    assert!(!denial.allowed && !denial.banned);
    // The window's end.
    let until = t + denial.wait.unwrap().as_nanos() as u64;
    assert_eq!(write_back(&a, t).await, 0);
    assert_eq!(write_back(&b, t).await, 0);
    flushall(&server).await;
    let t1 = t + 10 * SEC;
    // a writes "denied" back; b "full", and finds "denied" there.
    assert_eq!(write_back(&a, t1).await, 1);
    assert_eq!(write_back(&b, t1).await, 1);
    let mut admitted = [0usize; 3];
    for i in 0..3 * L as u64 {
        let s = if i % 2 == 0 { &a } else { &b };
        for (n, key) in admitted.iter_mut().zip(keys) {
            let d = check(s, key, t1 + i).await;
            *n += usize::from(d.allowed);
            if key != "partly" {
                assert!(!d.banned, "{d:?}");
                assert_eq!(d.wait, Some(Duration::from_nanos(until - t1 - i)));
            }
        }
    }
    assert_eq!(admitted, [0, 0, L], "held: none; not held: one more L");
    // An unban keeps what the key used; a reset forgets it.
    let t2 = t1 + 5 * SEC;
    Store::<str>::unban(&b, "full").await.unwrap();
    assert!(!check(&b, "full", t2).await.allowed);
    Store::<str>::reset(&b, "full").await.unwrap();
    assert!(check(&b, "full", t2).await.allowed);
    // At their instant (the window's end) the keys are admitted again.
    for key in keys {
        assert!(check(&b, key, until).await.allowed);
    }
}

/// Redis admitting a key that an instance holds as refused is the sign of
/// a loss: that instance writes back at once, without waiting for its
/// upkeep, so the key gets no more than the checks made meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_of_a_held_key_writes_back_at_once() {
    let server = server!();
    let url = server.url();
    const L: usize = 20;
    let a = store(&url, "fixed-window 20/1h", None, 1024, TimeSource::Caller);
    for _ in 0..L {
        assert!(check(&a, "k", T0).await.allowed);
    }
    assert!(!check(&a, "k", T0).await.allowed);
    // Its upkeep read the marker.
    assert_eq!(write_back(&a, T0).await, 0);
    flushall(&server).await;
    // Past the deny cache's second: the checks reach Redis.
    let t1 = T0 + 2 * SEC;
    let mut admitted = 0;
    for i in 0..L as u64 {
        admitted += usize::from(check(&a, "k", t1 + i).await.allowed);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted < L, "{admitted} admitted: no write-back");
    assert!(!check(&a, "k", t1 + 2 * SEC).await.allowed);
}

/// The store's upkeep (`maintain`) writes back too, and so does an
/// instance that learnt of a ban by pub/sub (Redis's clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintain_writes_back_a_ban_told_by_another_instance() {
    let server = server!();
    let url = server.url();
    let a = store(&url, "gcra 10/1s", None, 1024, TimeSource::Redis);
    let b = store(&url, "gcra 10/1s", None, 1024, TimeSource::Redis);
    // b reads the marker, and subscribes.
    assert_eq!(write_back(&b, 0).await, 0);
    crate::invalidation::subscribed_to(&server, "t:invalidate", 2).await;
    Store::<str>::ban(&a, "k", Duration::from_secs(600), 0)
        .await
        .unwrap();
    drop(a);
    // Time for the publication to reach b, even on a busy machine.
    tokio::time::sleep(Duration::from_secs(2)).await;
    flushall(&server).await;
    tokio::time::sleep(ratelimit_redis::WRITE_BACK_EVERY).await;
    ratelimit_core::store::Upkeep::maintain(&b, 0);
    let c = store(&url, "gcra 10/1s", None, 0, TimeSource::Redis);
    let mut banned = false;
    for _ in 0..200 {
        banned = check(&c, "k", 0).await.banned;
        if banned {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(banned, "not written back by b's upkeep");
}

/// A lease that takes a key's last units holds the key as refused too:
/// written back after a loss, so another instance refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_took_the_last_units_is_written_back() {
    let server = server!();
    let url = server.url();
    let a = RedisStore::builder(
        url.as_str(),
        "fixed-window 5/1h".parse::<AnyAlgorithm>().unwrap(),
    )
    .prefix("t:")
    .time_source(TimeSource::Caller)
    .lease(2, Duration::from_secs(60))
    .build()
    .unwrap();
    let b = store(&url, "fixed-window 5/1h", None, 0, TimeSource::Caller);
    // Cold: 1 from Redis; hot: a lease of 2 (one spent), then the last 2.
    for _ in 0..5 {
        assert!(check(&a, "k", T0).await.allowed);
    }
    assert_eq!(write_back(&a, T0).await, 0);
    flushall(&server).await;
    assert_eq!(write_back(&a, T0 + SEC).await, 1);
    assert!(!check(&b, "k", T0 + SEC).await.allowed);
}
