//! `StoreSettings` and `AnyStore`: a store chosen by settings, in memory or
//! in Redis, used through `Store` alike.

use crate::server;
use ratelimit_core::{AnyAlgorithm, Store};
use ratelimit_redis::{AnyStore, StoreSettings};
use std::time::Duration;

fn gcra(spec: &str) -> AnyAlgorithm {
    spec.parse().unwrap()
}

async fn admitted<S: Store<String>>(store: &S, key: &str, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        if store.check(&key.to_owned(), 1, 0).await.unwrap().allowed {
            admitted += 1;
        }
    }
    admitted
}

#[tokio::test]
async fn memory_by_settings() {
    // A cap far above the test's two keys: it is split over the shards,
    // and two keys sharing a shard of one place would evict each other.
    let settings = StoreSettings::Memory {
        max_keys: Some(100_000),
    };
    let store: AnyStore<String> = settings.build("login", gcra("gcra 3/1h"), None).unwrap();
    assert!(matches!(store, AnyStore::Memory(_)));
    assert_eq!(store.algorithm().to_string(), "gcra 3/1h");
    assert_eq!(admitted(&store, "a", 5).await, 3);
    assert_eq!(admitted(&store, "b", 5).await, 3);
    let refund = store.refund(&"a".to_owned(), 1, 0, 0).await;
    assert_eq!(refund, Ok(()));
    assert_eq!(admitted(&store, "a", 5).await, 1);
    store.maintain(0);
}

/// Redis settings on `server`, with `prefix`, no fallback, a 5 s timeout.
pub fn settings(server: &crate::harness::RedisServer, prefix: &str) -> StoreSettings {
    StoreSettings::Redis {
        url: server.url(),
        tls_ca: None,
        prefix: Some(prefix.to_owned()),
        timeout: Some(Duration::from_secs(5)),
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    }
}

#[tokio::test]
async fn redis_by_settings_shared_by_two_instances_and_apart_per_limit() {
    let server = server!();
    let settings = settings(&server, "app:");
    let a: AnyStore<String> = settings.build("login", gcra("gcra 3/1h"), None).unwrap();
    let b: AnyStore<String> = settings.build("login", gcra("gcra 3/1h"), None).unwrap();
    let other: AnyStore<String> = settings.build("search", gcra("gcra 3/1h"), None).unwrap();
    assert!(matches!(a, AnyStore::Redis(_)));
    // Two instances share one limit's state ...
    assert_eq!(admitted(&a, "k", 2).await, 2);
    assert_eq!(admitted(&b, "k", 5).await, 1);
    // ... and another limit with the same algorithm has its own.
    assert_eq!(admitted(&other, "k", 5).await, 3);
    if let AnyStore::Redis(r) = &a {
        assert!(
            r.redis_key("k").starts_with("app:login:{k}:"),
            "{}",
            r.redis_key("k")
        );
    }
}

#[tokio::test]
async fn redis_fallback_by_settings() {
    let mut server = server!();
    let with = StoreSettings::Redis {
        url: server.url(),
        tls_ca: None,
        prefix: None,
        timeout: Some(Duration::from_millis(200)),
        fallback_max_keys: Some(100),
        lease: None,
        key_secret: None,
    };
    let without = StoreSettings::Redis {
        url: server.url(),
        tls_ca: None,
        prefix: None,
        timeout: Some(Duration::from_millis(200)),
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    };
    let with: AnyStore<String> = with.build("l", gcra("gcra 2/1h"), None).unwrap();
    let without: AnyStore<String> = without.build("l", gcra("gcra 2/1h"), None).unwrap();
    server.kill();
    // Redis is gone: the fallback decides in memory, exactly ...
    assert_eq!(admitted(&with, "k", 5).await, 2);
    // ... and without one the failure is an error for the layer's policy.
    let err = without.check(&"k".to_owned(), 1, 0).await.unwrap_err();
    assert!(err.to_string().contains("redis"), "{err}");
}

#[test]
fn bad_settings_are_errors() {
    let bad_url = StoreSettings::Redis {
        url: "http://nope".to_owned(),
        tls_ca: None,
        prefix: None,
        timeout: None,
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    };
    let err = bad_url
        .build::<String>("l", gcra("gcra 1/1s"), None)
        .unwrap_err();
    assert!(err.to_string().contains("http://nope"), "{err}");
    let braces = StoreSettings::Redis {
        url: "redis://127.0.0.1/".to_owned(),
        tls_ca: None,
        prefix: None,
        timeout: None,
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    };
    let err = braces
        .build::<String>("{l}", gcra("gcra 1/1s"), None)
        .unwrap_err();
    assert!(err.to_string().contains("braces"), "{err}");
}

#[cfg(feature = "serde")]
#[test]
fn settings_from_toml() {
    #[derive(serde::Deserialize)]
    struct File {
        store: StoreSettings,
    }
    let file: File = toml::from_str(
        "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379/\"\ntimeout = \"20ms\"\nfallback-max-keys = 5000\n",
    )
    .unwrap();
    assert_eq!(
        file.store,
        StoreSettings::Redis {
            url: "redis://127.0.0.1:6379/".to_owned(),
            tls_ca: None,
            prefix: None,
            timeout: Some(Duration::from_millis(20)),
            fallback_max_keys: Some(5000),
            lease: None,
            key_secret: None,
        }
    );
    // A key secret from the settings: 32 hex digits, never shown.
    let file: File = toml::from_str(
        "[store]\nkind = \"redis\"\nurl = \"redis://x/\"\nkey-secret = \"000102030405060708090a0b0c0d0e0f\"\n",
    )
    .unwrap();
    let StoreSettings::Redis { key_secret, .. } = &file.store else {
        panic!("{:?}", file.store)
    };
    let secret = key_secret.expect("read");
    assert_eq!(secret.0, std::array::from_fn(|i| i as u8));
    assert!(!format!("{:?}", file.store).contains("0102"));
    let bad = "[store]\nkind = \"redis\"\nurl = \"redis://x/\"\nkey-secret = \"a0b1\"\n";
    let err = toml::from_str::<File>(bad).err().unwrap().to_string();
    assert!(
        err.contains("4 characters, expected 32 hex digits") && !err.contains("a0b1"),
        "{err}"
    );
    let file: File = toml::from_str("[store]\nkind = \"memory\"\nmax-keys = 7\n").unwrap();
    assert_eq!(file.store, StoreSettings::Memory { max_keys: Some(7) });
    for (doc, want) in [
        ("[store]\nkind = \"disk\"\n", "disk"),
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://x/\"\ntimeout = \"soon\"\n",
            "soon",
        ),
        ("[store]\nkind = \"memory\"\nmax_keys = 7\n", "max_keys"),
    ] {
        let err = toml::from_str::<File>(doc).err().unwrap().to_string();
        assert!(err.contains(want) && err.contains("line"), "{doc}: {err}");
    }
}

/// How a reload reaches every instance through Redis: each instance
/// reloads its own file; the state is shared and carried over, and an
/// instance not yet reloaded decides under its old settings until it is.
#[cfg(feature = "live")]
#[tokio::test]
async fn live_settings_through_redis_reach_each_instance_on_its_reload() {
    use ratelimit_core::LiveAlgorithm;
    let server = server!();
    let settings = settings(&server, "live:");
    let (live_a, live_b) = (
        LiveAlgorithm::new(gcra("gcra 3/1h")),
        LiveAlgorithm::new(gcra("gcra 3/1h")),
    );
    let a: AnyStore<String> = settings.build("l", &live_a, None).unwrap();
    let b: AnyStore<String> = settings.build("l", &live_b, None).unwrap();
    assert_eq!(admitted(&a, "k", 2).await, 2);
    assert_eq!(admitted(&b, "k", 5).await, 1);
    // Instance a reloads: the used quota carries over in Redis, 3 used of
    // a new 5 leaves 2 ...
    live_a.set(gcra("gcra 5/1h"));
    assert_eq!(a.algorithm().to_string(), "gcra 5/1h");
    assert_eq!(admitted(&a, "k", 5).await, 2);
    // ... b, not yet reloaded, decides under its own settings on the same
    // state (5 used, capped at its 3; here from its deny cache) ...
    assert_eq!(admitted(&b, "k", 1).await, 0);
    // ... and once it has, both share the new settings: 5 used of 5.
    live_b.set(gcra("gcra 5/1h"));
    assert_eq!(admitted(&b, "k", 5).await, 0);
    assert_eq!(admitted(&a, "k", 1).await, 0);
    assert_eq!(admitted(&b, "other", 9).await, 5);
    // Settings the scripts cannot decide exactly: logged, the previous
    // ones stay in force in Redis.
    live_a.set(gcra("sliding-window 5/30d"));
    assert_eq!(admitted(&a, "k", 1).await, 0);
}

#[cfg(feature = "live")]
#[tokio::test]
async fn live_settings_in_memory_keep_used_quota() {
    use ratelimit_core::LiveAlgorithm;
    let live = LiveAlgorithm::new(gcra("gcra 3/1h"));
    let store: AnyStore<String> = StoreSettings::Memory { max_keys: None }
        .build("l", &live, None)
        .unwrap();
    assert!(matches!(store, AnyStore::LiveMemory(_)));
    assert_eq!(admitted(&store, "k", 2).await, 2);
    live.set(gcra("gcra 4/1h"));
    assert_eq!(admitted(&store, "k", 5).await, 2);
}

#[tokio::test]
async fn memory_answers_at_once_redis_through_its_future() {
    let memory: AnyStore<String> = StoreSettings::Memory { max_keys: None }
        .build("l", gcra("gcra 1/1h"), None)
        .unwrap();
    let k = "k".to_owned();
    assert!(memory.check_now(&k, 1, 0).unwrap().unwrap().allowed);
    assert!(!memory.check_now(&k, 1, 0).unwrap().unwrap().allowed);
    assert_eq!(memory.refund_now(&k, 1, 0, 0), Some(Ok(())));
    assert!(memory.check_now(&k, 1, 0).unwrap().unwrap().allowed);
    let redis: AnyStore<String> = StoreSettings::Redis {
        url: "redis://127.0.0.1:1/".to_owned(),
        tls_ca: None,
        prefix: None,
        timeout: None,
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    }
    .build("l", gcra("gcra 1/1h"), None)
    .unwrap();
    assert!(redis.check_now(&k, 1, 0).is_none());
    assert!(redis.refund_now(&k, 1, 0, 0).is_none());
}
