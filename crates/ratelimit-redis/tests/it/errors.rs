//! Redis answering with an error: a clear `StoreError`, no panic, no
//! breaker trip; and the script survives a `SCRIPT FLUSH`.

use crate::server;
use ratelimit_core::{AnyAlgorithm, Gcra, SlidingLog, SlidingWindow, Store, StoreError};
use ratelimit_redis::{BreakerState, RedisStore};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_type_and_corrupt_state_are_clear_errors() {
    let server = server!();
    let mut c = server.client().await;
    let algorithms: [AnyAlgorithm; 3] = [
        Gcra::new(3, Duration::from_secs(1)).unwrap().into(),
        SlidingWindow::new(3, Duration::from_secs(1))
            .unwrap()
            .into(),
        SlidingLog::new(3, Duration::from_secs(1)).unwrap().into(),
    ];
    for a in algorithms {
        let store = RedisStore::builder(server.url(), a)
            .timeout(Duration::from_secs(5))
            .fallback_to_memory(100)
            .build()
            .unwrap();
        let key = store.redis_key("victim");
        // The wrong type: a hash for the string states, a string for the
        // log's hash.
        if matches!(a, AnyAlgorithm::SlidingLog(_)) {
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("x")
                .query_async(&mut c)
                .await
                .unwrap();
        } else {
            let _: () = redis::cmd("HSET")
                .arg(&key)
                .arg("f")
                .arg("v")
                .query_async(&mut c)
                .await
                .unwrap();
        }
        for _ in 0..10 {
            let e = Store::<str>::check(&store, "victim", 1, 0)
                .await
                .unwrap_err();
            let StoreError::Backend(msg) = &e else {
                panic!("{e:?}")
            };
            assert!(msg.contains("WRONGTYPE"), "{a:?}: {msg}");
        }
        // Redis is up: the breaker stays closed, other keys work.
        assert_eq!(store.breaker_state(), BreakerState::Closed);
        assert!(
            Store::<str>::check(&store, "other", 1, 0)
                .await
                .unwrap()
                .allowed
        );
        let e = Store::<str>::refund(&store, "victim", 1, 0, 0)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("WRONGTYPE"), "{e}");

        // A state that is not ours.
        if !matches!(a, AnyAlgorithm::SlidingLog(_)) {
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("garbage")
                .query_async(&mut c)
                .await
                .unwrap();
            let e = Store::<str>::check(&store, "victim", 1, 0)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("unreadable state"), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_is_reloaded_after_flush() {
    let server = server!();
    let store = RedisStore::builder(
        server.url(),
        Gcra::new(10, Duration::from_secs(60)).unwrap(),
    )
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    assert!(
        Store::<str>::check(&store, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    let mut c = server.client().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut c)
        .await
        .unwrap();
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 8);
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(store.script_hash())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(exists, vec![true]);
}
