//! `Store::reset` on Redis: one key's state deleted for each of the six
//! algorithms (both instances see it), several limits at once, a secret
//! key by its keyed-hash name, a live store's `:live` key, and the deny
//! cache and leases forgetting the key.

use crate::harness::Client;
use crate::server;
use ratelimit_core::algorithm::{StableHasher, StableKey};
use ratelimit_core::{AnyAlgorithm, Store};
use ratelimit_redis::RedisStore;
use std::fmt;
use std::time::Duration;

const SPECS: [&str; 6] = [
    "gcra 3/1h",
    "token-bucket 3 refill 3/1h",
    "leaky-bucket 1/1h queue 2",
    "fixed-window 3/1h",
    "sliding-log 3/1h",
    "sliding-window 3/1h",
];

fn store(url: String, spec: &str) -> RedisStore {
    RedisStore::builder(url, spec.parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .timeout(Duration::from_secs(5))
        .lease(2, Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn drain<K: ?Sized, S: Store<K>>(s: &S, key: &K) -> u64 {
    let mut admitted = 0;
    while s.check(key, 1, 0).await.unwrap().allowed {
        admitted += 1;
        assert!(admitted < 100, "never denied");
    }
    admitted
}

async fn keys(c: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    // States only: not the shared key secret.
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("t:{*").query_async(c).await.unwrap();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_gives_one_key_its_quota_back_on_both_instances() {
    let server = server!();
    let mut c = server.client().await;
    for spec in SPECS {
        let (a, b) = (store(server.url(), spec), store(server.url(), spec));
        let full = drain::<str, _>(&a, "k").await;
        assert!(full >= 3, "{spec}: {full}");
        assert_eq!(drain::<str, _>(&a, "other").await, full);
        // Denied, so cached in a's deny cache, and a lease may be out.
        Store::<str>::reset(&a, "k").await.unwrap();
        assert_eq!(
            keys(&mut c).await.len(),
            1,
            "{spec}: only other's state left"
        );
        // b had cached nothing: it sees the reset at once.
        assert!(
            Store::<str>::check(&b, "k", 1, 0).await.unwrap().allowed,
            "{spec}"
        );
        assert_eq!(drain::<str, _>(&a, "k").await, full - 1, "{spec}");
        assert_eq!(drain::<str, _>(&a, "other").await, 0, "{spec}");
        let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_deletes_every_limit_of_a_store() {
    let server = server!();
    let mut c = server.client().await;
    let s = RedisStore::builder(server.url(), "gcra 2/1h".parse::<AnyAlgorithm>().unwrap())
        .prefix("t:")
        .and_limit("fixed-window 5/1d".parse::<AnyAlgorithm>().unwrap())
        .build()
        .unwrap();
    assert_eq!(drain::<str, _>(&s, "k").await, 2);
    assert_eq!(keys(&mut c).await.len(), 2);
    Store::<str>::reset(&s, "k").await.unwrap();
    assert!(keys(&mut c).await.is_empty());
    assert_eq!(drain::<str, _>(&s, "k").await, 2);
}

/// An API key, as tower-ratelimit's `ApiKey` extractor marks it.
struct Secret(&'static str);

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl StableKey for Secret {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self.0.as_bytes());
    }

    fn is_secret(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_key_is_reset_by_its_hashed_name() {
    let server = server!();
    let mut c = server.client().await;
    let s = store(server.url(), "gcra 2/1h");
    let key = Secret("demo-key-1");
    assert_eq!(drain(&s, &key).await, 2);
    let name = s.secret_redis_key("demo-key-1").unwrap();
    assert!(keys(&mut c).await.contains(&name));
    s.reset(&key).await.unwrap();
    assert!(!keys(&mut c).await.contains(&name));
    assert_eq!(drain(&s, &key).await, 2);
}

#[cfg(feature = "live")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_store_resets_its_live_key_under_an_override() {
    use ratelimit_core::LiveAlgorithm;
    use ratelimit_redis::{AnyStore, LiveRedis, TimeSource};
    let server = server!();
    let mut c = server.client().await;
    let live = LiveAlgorithm::new("fixed-window 2/1d".parse::<AnyAlgorithm>().unwrap());
    let redis = LiveRedis::builder(server.url(), &live)
        .prefix("t:")
        .time_source(TimeSource::Caller)
        .build()
        .unwrap();
    let store: AnyStore<String> = AnyStore::LiveRedis(Box::new(redis));
    let k = "vip".to_owned();
    assert_eq!(drain(&store, &k).await, 2);
    assert_eq!(keys(&mut c).await, ["t:{vip}:live"]);
    store.reset(&k).await.unwrap();
    assert!(keys(&mut c).await.is_empty());
    live.set_override("vip", "fixed-window 3/1d".parse::<AnyAlgorithm>().unwrap())
        .unwrap();
    assert_eq!(drain(&store, &k).await, 3);
    store.reset(&k).await.unwrap();
    assert_eq!(drain(&store, &k).await, 3);
}
