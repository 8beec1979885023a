//! Run-time entries shared through Redis (`RedisEntries`): what one
//! instance puts, every instance's copy holds at once, until its ttl
//! runs out or it is removed; the cap is refused by name.

use crate::server;
use ratelimit_core::plumbing::{EntryTable, SharedEntries, SharedEntry};
use ratelimit_redis::RedisEntries;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Copy = Arc<Mutex<Option<Vec<SharedEntry>>>>;

fn follow(entries: &RedisEntries) -> Copy {
    let copy: Copy = Arc::default();
    let c = Arc::clone(&copy);
    entries.follow(Arc::new(move |all, _| *c.lock().unwrap() = Some(all)));
    copy
}

/// How long until `copy` satisfies `want` (polled for up to 5 s).
async fn until(copy: &Copy, want: impl Fn(&[SharedEntry]) -> bool) -> Option<Duration> {
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(5) {
        if copy.lock().unwrap().as_deref().is_some_and(&want) {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

fn list_entry(table: EntryTable, name: &str, ttl: Duration) -> SharedEntry {
    SharedEntry {
        table,
        scope: String::new(),
        name: name.to_owned(),
        value: String::new(),
        left: Some(ttl),
    }
}

fn has(name: &'static str) -> impl Fn(&[SharedEntry]) -> bool {
    move |all| all.iter().any(|e| e.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_reach_the_other_instance_at_once_and_expire() {
    let server = server!();
    let a = RedisEntries::with(server.url(), "ent:", Duration::from_millis(200)).unwrap();
    let b = RedisEntries::with(server.url(), "ent:", Duration::from_secs(60)).unwrap();
    let seen = follow(&b);
    // B's first copy (empty), then B is subscribed.
    assert!(until(&seen, |_| true).await.is_some());
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.put(
        list_entry(EntryTable::Deny, "192.0.2.0/24", Duration::from_secs(60)),
        10,
    )
    .await
    .unwrap();
    let took = until(&seen, has("192.0.2.0/24")).await;
    eprintln!("entry seen on the other instance after {took:?}");
    // By its subscription: B's own refresh is a minute away.
    assert!(
        took.is_some_and(|t| t <= Duration::from_secs(5)),
        "{took:?}"
    );
    let held = seen.lock().unwrap().clone().unwrap();
    let e = held.iter().find(|e| e.name == "192.0.2.0/24").unwrap();
    assert_eq!(e.table, EntryTable::Deny);
    assert!(e.left.unwrap() > Duration::from_secs(50));
    // An override, with its limit.
    let o = SharedEntry {
        table: EntryTable::Override,
        scope: "login".to_owned(),
        name: "10.0.0.7".to_owned(),
        value: "gcra 50/1m".to_owned(),
        left: None,
    };
    a.put(o.clone(), 10).await.unwrap();
    assert!(until(&seen, |all| all.contains(&o)).await.is_some());
    // Removed.
    assert!(a
        .remove(EntryTable::Deny, "", "192.0.2.0/24")
        .await
        .unwrap());
    assert!(!a
        .remove(EntryTable::Deny, "", "192.0.2.0/24")
        .await
        .unwrap());
    assert!(until(&seen, |all| !has("192.0.2.0/24")(all))
        .await
        .is_some());
    assert!(a
        .remove(EntryTable::Override, "login", "10.0.0.7")
        .await
        .unwrap());
    // A ttl of 2 s: gone from the copy of A (refreshed every 200 ms)
    // within the 5 s `until` waits.
    let mine = follow(&a);
    a.put(
        list_entry(EntryTable::Allow, "vip", Duration::from_secs(2)),
        10,
    )
    .await
    .unwrap();
    assert!(until(&mine, has("vip")).await.is_some());
    assert!(until(&mine, |all| !has("vip")(all)).await.is_some());
}

#[tokio::test]
async fn the_cap_is_refused_by_name() {
    let server = server!();
    let a = RedisEntries::new(server.url(), "cap:").unwrap();
    let hour = Duration::from_secs(3600);
    for i in 0..3 {
        a.put(list_entry(EntryTable::Allow, &format!("k{i}"), hour), 3)
            .await
            .unwrap();
    }
    // A renewal is no new entry.
    a.put(list_entry(EntryTable::Allow, "k0", hour), 3)
        .await
        .unwrap();
    let e = a
        .put(list_entry(EntryTable::Allow, "k3", hour), 3)
        .await
        .unwrap_err();
    assert!(e.contains("at most 3"), "{e}");
    // Expired entries make room.
    let b = RedisEntries::new(server.url(), "cap2:").unwrap();
    for i in 0..3 {
        b.put(
            list_entry(EntryTable::Deny, &format!("k{i}"), Duration::from_millis(1)),
            3,
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    b.put(list_entry(EntryTable::Deny, "k3", hour), 3)
        .await
        .unwrap();
}

/// Every instance on a prefix computes the same digest, keyed with the
/// secret at `{prefix}key-secret` (a store on that prefix names a secret
/// key by the same hash); another prefix, another secret; a fixed secret
/// writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_computes_the_same_digest() {
    use crate::harness::Client as _;
    use ratelimit_core::plumbing::EntryDigest;
    let server = server!();
    let a = RedisEntries::new(server.url(), "dig:").unwrap();
    let b = RedisEntries::new(server.url(), "dig:").unwrap();
    let h = a.digest().await.unwrap().of("sk-live-1");
    assert!(EntryDigest::is_digest(&h) && !h.contains("sk-live"), "{h}");
    assert_eq!(b.digest().await.unwrap().of("sk-live-1"), h);
    assert_ne!(b.digest().await.unwrap().of("sk-live-2"), h);
    let store = ratelimit_redis::RedisStore::builder(
        server.url(),
        ratelimit_core::FixedWindow::new(3, Duration::from_secs(60)).unwrap(),
    )
    .prefix("dig:")
    .build()
    .unwrap();
    ratelimit_core::Store::<str>::check(&store, "warm", 1, 0)
        .await
        .unwrap();
    let named = store.secret_redis_key("sk-live-1").unwrap();
    assert!(named.contains(&h), "{named} vs {h}");
    let other = RedisEntries::new(server.url(), "other:").unwrap();
    assert_ne!(other.digest().await.unwrap().of("sk-live-1"), h);
    let fixed = |prefix: &str| {
        RedisEntries::with_key_secret(server.url(), prefix, Duration::from_secs(5), [7; 16])
            .unwrap()
    };
    let f = fixed("fix:").digest().await.unwrap().of("sk-live-1");
    assert_eq!(fixed("fix2:").digest().await.unwrap().of("sk-live-1"), f);
    assert_ne!(f, h);
    let mut c = server.client().await;
    let there: (bool, bool) = redis::pipe()
        .cmd("EXISTS")
        .arg("dig:key-secret")
        .cmd("EXISTS")
        .arg("fix:key-secret")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(there, (true, false));
}

/// Redis loses the secret (`FLUSHALL`): an instance following the entries
/// writes it back, so digests stay the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_secret_is_written_back() {
    use crate::harness::Client as _;
    let server = server!();
    let a = RedisEntries::with(server.url(), "lost:", Duration::from_millis(100)).unwrap();
    let _copy = follow(&a);
    let h = a.digest().await.unwrap().of("sk-live-1");
    let mut c = server.client().await;
    let held = || async {
        let mut c = server.client().await;
        redis::cmd("GET")
            .arg("lost:key-secret")
            .query_async::<Option<String>>(&mut c)
            .await
            .unwrap()
    };
    let before = held().await.expect("the secret written");
    redis::cmd("FLUSHALL")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let since = Instant::now();
    while held().await.is_none() {
        assert!(since.elapsed() < Duration::from_secs(5), "not written back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(held().await.unwrap(), before);
    let b = RedisEntries::new(server.url(), "lost:").unwrap();
    assert_eq!(b.digest().await.unwrap().of("sk-live-1"), h);
}

/// Redis loses the entries (`FLUSHALL`): the instances' copies are
/// written back, each entry with the time it had left, and no copy is
/// emptied meanwhile; a new instance reads them from Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_entries_are_written_back() {
    use crate::harness::Client as _;
    let server = server!();
    let a = RedisEntries::with(server.url(), "wb:", Duration::from_millis(100)).unwrap();
    let b = RedisEntries::with(server.url(), "wb:", Duration::from_millis(100)).unwrap();
    let (seen_a, seen_b) = (follow(&a), follow(&b));
    let deny = list_entry(EntryTable::Deny, "192.0.2.0/24", Duration::from_secs(600));
    let moved = SharedEntry {
        table: EntryTable::Plan,
        scope: "api-key".to_owned(),
        name: "#00ff".to_owned(),
        value: "pro".to_owned(),
        left: None,
    };
    a.put(deny, 10).await.unwrap();
    a.put(moved.clone(), 10).await.unwrap();
    let both = |all: &[SharedEntry]| all.len() == 2;
    assert!(until(&seen_b, both).await.is_some());
    assert!(until(&seen_a, both).await.is_some());
    let mut c = server.client().await;
    redis::cmd("FLUSHALL")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(2) {
        for seen in [&seen_a, &seen_b] {
            let n = seen.lock().unwrap().as_ref().map_or(0, Vec::len);
            assert_eq!(n, 2, "a copy emptied by the loss");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fresh = RedisEntries::with(server.url(), "wb:", Duration::from_secs(60)).unwrap();
    let seen = follow(&fresh);
    assert!(until(&seen, both).await.is_some(), "written back to Redis");
    let held = seen.lock().unwrap().clone().unwrap();
    assert!(held.contains(&moved), "{held:?}");
    let d = held.iter().find(|e| e.name == "192.0.2.0/24").unwrap();
    let left = d.left.unwrap();
    assert!(
        left > Duration::from_secs(590) && left <= Duration::from_secs(600),
        "{left:?}"
    );
}
