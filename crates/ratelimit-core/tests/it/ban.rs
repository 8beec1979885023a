//! Bans in memory: a key its limit denied stays denied for the ban,
//! whatever the algorithm says, answered by the deny cache with the ban's
//! remaining time; escalation, bans and unbans by code, and the cap.

use crate::now::Now;
use ratelimit_core::store::Upkeep;
use ratelimit_core::{AnyAlgorithm, BanPolicy, Decision, MemoryStore, Store};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

fn store(spec: &str, ban: BanPolicy, deny_cache: bool) -> MemoryStore<AnyAlgorithm, String> {
    MemoryStore::builder(spec.parse::<AnyAlgorithm>().unwrap())
        .ban(Some(ban))
        .deny_cache(deny_cache)
        .build()
        .unwrap()
}

fn check(s: &MemoryStore<AnyAlgorithm, String>, key: &str, now: u64) -> Decision {
    s.check(key, 1, now).value().unwrap()
}

#[test]
fn a_denied_key_stays_denied_for_the_ban_with_or_without_the_deny_cache() {
    for deny_cache in [true, false] {
        let ban = BanPolicy::new(Duration::from_secs(6)).unwrap();
        let s = store("fixed-window 2/2s", ban, deny_cache);
        assert!(check(&s, "ip", 0).allowed);
        assert!(check(&s, "ip", 0).allowed);
        let d = check(&s, "ip", SEC / 2);
        assert!(!d.allowed && d.banned, "{d:?}");
        assert_eq!(d.wait, Some(Duration::from_secs(6)));
        assert_eq!(d.reset, Duration::from_secs(6));
        // 3 s later the window has turned over, but the ban stands.
        let d = check(&s, "ip", 3 * SEC + SEC / 2);
        assert!(!d.allowed && d.banned);
        assert_eq!(d.retry_after(), Some(Duration::from_secs(3)));
        // Another key is untouched; a peek is never refused.
        assert!(check(&s, "other", 3 * SEC).allowed);
        assert!(s.check("ip", 0, 3 * SEC).value().unwrap().allowed);
        assert_eq!(
            s.ban_left("ip", 4 * SEC).now().unwrap(),
            Some(Duration::from_millis(2500))
        );
        // At the ban's end the algorithm decides again.
        let d = check(&s, "ip", 6 * SEC + SEC / 2);
        assert!(d.allowed, "{d:?}");
        assert_eq!(s.ban_left("ip", 7 * SEC).now().unwrap(), None);
    }
}

#[test]
fn repeat_offences_escalate_up_to_the_max_and_are_forgiven() {
    let s10 = Duration::from_secs(10);
    let ban = BanPolicy::new(s10)
        .unwrap()
        .escalate(2.0, s10 * 3, s10 * 10)
        .unwrap();
    let s = store("fixed-window 1/1s", ban, true);
    let mut now = 0;
    let mut lengths = Vec::new();
    for _ in 0..4 {
        assert!(check(&s, "ip", now).allowed);
        let d = check(&s, "ip", now);
        assert!(d.banned);
        lengths.push(d.wait.unwrap().as_secs());
        now += d.wait.unwrap().as_nanos() as u64;
    }
    assert_eq!(lengths, [10, 20, 30, 30]);
    // 100 s after the last ban: forgiven.
    now += 100 * SEC;
    assert!(check(&s, "ip", now).allowed);
    assert_eq!(check(&s, "ip", now).wait, Some(s10));
}

#[test]
fn bans_by_code_and_unbans() {
    let s = MemoryStore::<_, String>::new("gcra 10/1s".parse::<AnyAlgorithm>().unwrap());
    assert!(check(&s, "k", 0).allowed);
    Store::ban(&s, &"k".to_owned(), Duration::from_secs(60), 0)
        .into_ready()
        .ok()
        .unwrap()
        .unwrap();
    for t in [0, SEC, 59 * SEC] {
        let d = check(&s, "k", t);
        assert!(!d.allowed && d.banned, "{d:?}");
    }
    Store::unban(&s, &"k".to_owned())
        .into_ready()
        .ok()
        .unwrap()
        .unwrap();
    let d = check(&s, "k", 59 * SEC);
    assert!(d.allowed && !d.banned);
    // A ban that ran out and was swept (which frees the shard's table of
    // bans, see `store::shard`'s unit tests), then a new one.
    Store::ban(&s, &"k".to_owned(), Duration::from_secs(1), 59 * SEC)
        .into_ready()
        .ok()
        .unwrap()
        .unwrap();
    assert!(check(&s, "k", 59 * SEC + SEC / 2).banned);
    s.maintain(60 * SEC);
    s.sweep(60 * SEC);
    let d = check(&s, "k", 60 * SEC);
    assert!(d.allowed && !d.banned, "{d:?}");
    Store::ban(&s, &"k".to_owned(), Duration::from_secs(1), 60 * SEC)
        .into_ready()
        .ok()
        .unwrap()
        .unwrap();
    let d = check(&s, "k", 60 * SEC);
    assert!(!d.allowed && d.banned, "{d:?}");
    // A store without a ban policy does not ban on denials.
    for _ in 0..20 {
        check(&s, "j", 0);
    }
    assert!(!check(&s, "j", 0).banned);
}

#[test]
fn bans_are_bounded_by_the_cap() {
    let ban = BanPolicy::new(Duration::from_secs(3600)).unwrap();
    let s: MemoryStore<AnyAlgorithm, String> =
        MemoryStore::builder("fixed-window 1/1h".parse::<AnyAlgorithm>().unwrap())
            .max_keys(Some(64))
            .ban(Some(ban))
            .build()
            .unwrap();
    let (mut banned, mut refused) = (0, 0);
    for i in 0..10_000 {
        let k = format!("k{i}");
        check(&s, &k, 0);
        let second = check(&s, &k, 0);
        refused += u64::from(!second.allowed);
        banned += u64::from(second.banned);
    }
    // Every second request is refused. A key the store holds is banned;
    // one refused on the eviction sketch's estimate (this flood is far
    // past the cap) is refused, not banned: the estimate may be another
    // key's use.
    assert_eq!(refused, 10_000);
    assert!(banned >= 100, "{banned}");
    // Memory stays bounded: at most 64 states (and 64 bans) are held.
    assert!(s.len() <= 64);
}
