//! Keys marked secret (API keys, tokens) reach Redis only as keyed
//! hashes, under a secret every instance shares through Redis, restored
//! when Redis loses it.

use crate::harness::Client;
use crate::server;
use ratelimit_core::algorithm::{StableHasher, StableKey};
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::RedisStore;
use std::fmt;
use std::time::Duration;

/// An API key, as tower-ratelimit's `ApiKey` extractor marks it.
struct ApiKey(String);

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StableKey for ApiKey {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self.0.as_bytes());
    }

    fn is_secret(&self) -> bool {
        true
    }
}

fn store(url: String) -> RedisStore {
    RedisStore::builder(url, Gcra::new(10, Duration::from_secs(60)).unwrap())
        .prefix("app:api-key:")
        .build()
        .unwrap()
}

async fn all_keys(c: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(c).await.unwrap();
    keys.sort();
    keys
}

async fn secret(c: &mut redis::aio::MultiplexedConnection) -> Option<String> {
    redis::cmd("GET")
        .arg("app:api-key:key-secret")
        .query_async(c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_api_key_in_any_redis_key_name() {
    let server = server!();
    let (a, b) = (store(server.url()), store(server.url()));
    let api_keys: Vec<String> = (0..20).map(|i| format!("demo-key-{i}")).collect();
    for (i, k) in api_keys.iter().enumerate() {
        let s = if i % 2 == 0 { &a } else { &b };
        assert!(
            Store::<ApiKey>::check(s, &ApiKey(k.clone()), 1, 0)
                .await
                .unwrap()
                .allowed
        );
    }
    // A key not marked secret keeps its text (an IP, say).
    Store::<str>::check(&a, "192.0.2.1", 1, 0).await.unwrap();
    let mut c = server.client().await;
    let names = all_keys(&mut c).await;
    assert_eq!(names.len(), 20 + 1 + 1, "{names:?}");
    for name in &names {
        for k in &api_keys {
            assert!(!name.contains(k.as_str()), "{name} names {k}");
        }
        // Neither the bare numbers of the keys.
        assert!(!name.contains("demo"), "{name}");
    }
    assert!(names.contains(&"app:api-key:key-secret".to_owned()));
    assert!(names.contains(&a.redis_key("192.0.2.1")));
    // Stable across two stores: both name a key alike, and share its state.
    let name = a.secret_redis_key("demo-key-0").unwrap();
    assert_eq!(Some(&name), b.secret_redis_key("demo-key-0").as_ref());
    assert!(names.contains(&name));
    assert!(
        name.starts_with("app:api-key:{#") && name.len() > 40,
        "{name}"
    );
    let d = Store::<ApiKey>::check(&b, &ApiKey("demo-key-0".into()), 1, 0)
        .await
        .unwrap();
    assert_eq!(d.remaining, 8, "a's check of the key counted for b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_restores_the_secret() {
    let server = server!();
    let a = store(server.url());
    let key = ApiKey("demo-key-1".into());
    Store::<ApiKey>::check(&a, &key, 1, 0).await.unwrap();
    let mut c = server.client().await;
    let before = secret(&mut c).await.expect("written at connect");
    let name = a.secret_redis_key("demo-key-1").unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    assert_eq!(secret(&mut c).await, None);
    a.sync_key_secret().await.unwrap();
    assert_eq!(
        secret(&mut c).await.as_deref(),
        Some(before.as_str()),
        "restored"
    );
    // A new instance reads the restored secret: the same names.
    let b = store(server.url());
    b.ping().await.unwrap();
    assert_eq!(b.secret_redis_key("demo-key-1").unwrap(), name);
    // Through the store's upkeep too (`maintain`, every second).
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    tokio::time::sleep(ratelimit_redis::KEY_SECRET_SYNC).await;
    ratelimit_core::store::Upkeep::maintain(&b, 0);
    for _ in 0..200 {
        if secret(&mut c).await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(secret(&mut c).await.as_deref(), Some(before.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_from_the_settings_is_used_and_not_stored() {
    let server = server!();
    let fixed = |url: String| {
        RedisStore::builder(url, Gcra::new(10, Duration::from_secs(60)).unwrap())
            .prefix("app:api-key:")
            .key_secret([7; 16])
            .build()
            .unwrap()
    };
    let a = fixed(server.url());
    Store::<ApiKey>::check(&a, &ApiKey("demo-key-1".into()), 1, 0)
        .await
        .unwrap();
    let mut c = server.client().await;
    assert_eq!(secret(&mut c).await, None);
    let names = all_keys(&mut c).await;
    assert_eq!(names, [a.secret_redis_key("demo-key-1").unwrap()]);
    assert_eq!(
        fixed(server.url()).secret_redis_key("demo-key-1"),
        a.secret_redis_key("demo-key-1")
    );
    // Another secret names the key otherwise.
    let shared = store(server.url());
    shared.ping().await.unwrap();
    assert_ne!(
        shared.secret_redis_key("demo-key-1"),
        a.secret_redis_key("demo-key-1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_key_without_redis_takes_the_failure_policy() {
    // A port nobody listens on: the secret is never read.
    let port = ratelimit_test_support::redis_server::free_port();
    let store = RedisStore::builder(
        format!("redis://127.0.0.1:{port}/"),
        Gcra::new(2, Duration::from_secs(60)).unwrap(),
    )
    .fallback_to_memory(10)
    .build()
    .unwrap();
    let key = ApiKey("demo-key-1".into());
    let mut admitted = 0;
    for _ in 0..6 {
        admitted += u64::from(
            Store::<ApiKey>::check(&store, &key, 1, 0)
                .await
                .unwrap()
                .allowed,
        );
    }
    assert_eq!(admitted, 2, "the fallback limits it");
    assert_eq!(store.secret_redis_key("demo-key-1"), None);
    assert_eq!(store.breaker_state(), ratelimit_redis::BreakerState::Open);
}
