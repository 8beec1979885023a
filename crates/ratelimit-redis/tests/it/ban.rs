//! Bans on Redis: set and read inside the check's script, so a ban made
//! through one instance holds on every instance; answered by the deny
//! cache until it ends; escalation; bans and unbans by code; a live
//! store; the other stores' scripts unchanged by it.

use crate::harness::Client;
use crate::server;
use ratelimit_core::{AnyAlgorithm, BanPolicy, Decision, Store};
use ratelimit_redis::{RedisStore, TimeSource};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;
/// A real epoch time, on no whole second.
const T0: u64 = 1_700_000_000_123_456_789;

fn store(url: String, spec: &str, ban: Option<BanPolicy>, deny_cache: usize) -> RedisStore {
    RedisStore::builder(url, spec.parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .deny_cache(deny_cache)
        .ban(ban)
        .build()
        .unwrap()
}

pub async fn check(s: &RedisStore, key: &str, now: u64) -> Decision {
    Store::<str>::check(s, key, 1, now).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_made_on_one_instance_holds_on_both() {
    let server = server!();
    let ban = BanPolicy::new(Duration::from_secs(6)).unwrap();
    let a = store(server.url(), "fixed-window 2/2s", Some(ban), 1024);
    let b = store(server.url(), "fixed-window 2/2s", Some(ban), 0);
    assert!(check(&a, "ip", T0).await.allowed);
    assert!(check(&b, "ip", T0).await.allowed);
    let d = check(&a, "ip", T0 + SEC / 2).await;
    assert!(!d.allowed && d.banned, "{d:?}");
    assert_eq!(d.wait, Some(Duration::from_secs(6)));
    // 3 s later the window has turned over; the ban holds on both.
    for s in [&a, &b] {
        let d = check(s, "ip", T0 + 3 * SEC + SEC / 2).await;
        assert!(!d.allowed && d.banned, "{d:?}");
        assert_eq!(d.wait, Some(Duration::from_secs(3)));
    }
    // After 7 s the key may try again, on either.
    assert!(check(&b, "ip", T0 + 7 * SEC).await.allowed);
    assert!(check(&a, "ip", T0 + 7 * SEC).await.allowed);
    let mut c = server.client().await;
    let ttl: i64 = redis::cmd("PTTL")
        .arg("t:{ip}:ban")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(ttl > 0, "the ban key expires: {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_key_is_answered_by_the_deny_cache_a_second_at_a_time() {
    let server = server!();
    let ban = BanPolicy::new(Duration::from_secs(60)).unwrap();
    let a = store(server.url(), "gcra 1/1s", Some(ban), 1024);
    let mut c = server.client().await;
    assert!(check(&a, "k", T0).await.allowed);
    assert!(check(&a, "k", T0).await.banned);
    let trips = crate::harness::round_trips(&mut c).await;
    for i in 0..100 {
        let d = check(&a, "k", T0 + i * SEC / 2).await;
        assert!(d.banned && !d.allowed);
    }
    // 50 s of checks: from the cache, but for one round trip a second
    // (a denial is answered locally for at most 1 s).
    let made = crate::harness::round_trips(&mut c).await - trips;
    assert!(made <= 51, "{made} round trips for 100 checks in 50 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeat_offences_escalate_in_redis() {
    let server = server!();
    let s10 = Duration::from_secs(10);
    let ban = BanPolicy::new(s10)
        .unwrap()
        .escalate(2.0, s10 * 3, s10 * 10)
        .unwrap();
    let a = store(server.url(), "fixed-window 1/1s", Some(ban), 0);
    let mut now = T0;
    let mut lengths = Vec::new();
    for _ in 0..4 {
        assert!(check(&a, "ip", now).await.allowed);
        let d = check(&a, "ip", now).await;
        assert!(d.banned);
        lengths.push(d.wait.unwrap().as_secs());
        now += d.wait.unwrap().as_nanos() as u64;
    }
    assert_eq!(lengths, [10, 20, 30, 30]);
    now += 100 * SEC;
    assert!(check(&a, "ip", now).await.allowed);
    assert_eq!(check(&a, "ip", now).await.wait, Some(s10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_and_unbans_by_code_on_any_store() {
    let server = server!();
    let a = store(server.url(), "gcra 10/1s", None, 1024);
    let b = store(server.url(), "gcra 10/1s", None, 1024);
    let multi = RedisStore::builder(server.url(), "gcra 10/1s".parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .and_limit("fixed-window 100/1d".parse::<AnyAlgorithm>().unwrap())
        .time_source(TimeSource::Caller)
        // Another instance's deny cache would answer the ban it cached
        // until the ban's end (see ALGORITHMS.md, Bans).
        .deny_cache(0)
        .build()
        .unwrap();
    assert!(check(&a, "k", T0).await.allowed);
    Store::<str>::ban(&a, "k", Duration::from_secs(60), T0)
        .await
        .unwrap();
    for s in [&a, &b, &multi] {
        let d = check(s, "k", T0 + SEC).await;
        assert!(d.banned, "{d:?}");
        assert_eq!(d.wait, Some(Duration::from_secs(59)));
    }
    // A peek is never refused.
    assert!(Store::<str>::check(&a, "k", 0, T0).await.unwrap().allowed);
    let left = Store::<str>::ban_left(&b, "k", T0 + 10 * SEC)
        .await
        .unwrap();
    assert_eq!(left, Some(Duration::from_secs(50)));
    assert_eq!(Store::<str>::ban_left(&b, "none", T0).await.unwrap(), None);
    Store::<str>::unban(&b, "k").await.unwrap();
    // b forgot its own cached denial; a still has its own cached until it
    // is told (an unban through a forgets it there).
    assert!(check(&b, "k", T0 + SEC).await.allowed);
    Store::<str>::unban(&a, "k").await.unwrap();
    assert!(check(&a, "k", T0 + SEC).await.allowed);
    assert!(check(&multi, "k", T0 + SEC).await.allowed);
    // Without a ban policy, a denial bans nothing.
    for _ in 0..12 {
        check(&a, "j", T0).await;
    }
    assert!(!check(&a, "j", T0).await.banned);
}

#[cfg(feature = "live")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_store_bans_through_its_settings() {
    use ratelimit_core::LiveAlgorithm;
    use ratelimit_redis::StoreSettings;
    let server = server!();
    let settings = crate::any_store::settings(&server, "app:");
    let live = LiveAlgorithm::new("fixed-window 2/1h".parse::<AnyAlgorithm>().unwrap());
    let ban = BanPolicy::new(Duration::from_secs(3600)).unwrap();
    let s = settings.build::<String>("login", &live, Some(ban)).unwrap();
    let k = "203.0.113.9".to_owned();
    assert!(s.check(&k, 1, 0).await.unwrap().allowed);
    assert!(s.check(&k, 1, 0).await.unwrap().allowed);
    let d = s.check(&k, 1, 0).await.unwrap();
    assert!(
        d.banned && d.wait.unwrap() >= Duration::from_secs(3500),
        "{d:?}"
    );
    let memory: StoreSettings = StoreSettings::Memory { max_keys: Some(10) };
    let m = memory.build::<String>("login", &live, Some(ban)).unwrap();
    assert!(m.check(&k, 2, 0).await.unwrap().allowed);
    assert!(m.check(&k, 1, 0).await.unwrap().banned);
}

/// A lease's take larger than what is left is denied with quota left:
/// that bans nothing, and the request is still admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_take_that_does_not_fit_bans_nothing() {
    let server = server!();
    let ban = BanPolicy::new(Duration::from_secs(60)).unwrap();
    let a = RedisStore::builder(server.url(), "gcra 3/1h".parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .time_source(TimeSource::Caller)
        .lease(2, Duration::from_secs(60))
        .ban(Some(ban))
        .build()
        .unwrap();
    let b = store(server.url(), "gcra 3/1h", Some(ban), 0);
    assert!(check(&a, "k", T0).await.allowed); // cold: 2 left
    assert!(check(&b, "k", T0).await.allowed); // 1 left
                                               // a's key is hot: a take of 2 does not fit, then a check of 1 does.
    let d = check(&a, "k", T0).await;
    assert!(d.allowed && !d.banned, "{d:?}");
    // Now nothing is left: the next denial bans.
    let d = check(&b, "k", T0).await;
    assert!(d.banned, "{d:?}");
}
