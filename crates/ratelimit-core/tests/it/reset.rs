//! `Store::reset`: one key of one store forgotten, for each of the six
//! algorithms, in a plain and a live store, through the trait and a
//! `BoxStore`; other keys keep what they used.

#[cfg(feature = "live")]
use ratelimit_core::LiveAlgorithm;
use ratelimit_core::{Answer, AnyAlgorithm, BoxStore, MemoryStore, Store};

const SPECS: [&str; 6] = [
    "gcra 3/1h",
    "token-bucket 3 refill 3/1h",
    "leaky-bucket 1/1h queue 2",
    "fixed-window 3/1h",
    "sliding-log 3/1h",
    "sliding-window 3/1h",
];

/// Checks `key` until denied at `now`; returns how many were admitted.
fn drain<S: Store<String>>(store: &S, key: &str, now: u64) -> u64 {
    let key = key.to_owned();
    let mut admitted = 0;
    while store
        .check(&key, 1, now)
        .into_ready()
        .ok()
        .unwrap()
        .unwrap()
        .allowed
    {
        admitted += 1;
        assert!(admitted < 100, "never denied");
    }
    admitted
}

fn resets_one_key<S: Store<String>>(store: &S, spec: &str) {
    let now = 1_000_000_000;
    let full = drain(store, "a", now);
    assert!(full >= 3, "{spec}: {full}");
    assert_eq!(drain(store, "b", now), full, "{spec}");
    store
        .reset(&"a".to_owned())
        .into_ready()
        .ok()
        .unwrap()
        .unwrap();
    // The denial the store remembered went with the state.
    assert_eq!(
        drain(store, "a", now),
        full,
        "{spec}: a reset gives it all back"
    );
    assert_eq!(
        drain(store, "b", now),
        0,
        "{spec}: the other key is untouched"
    );
}

#[test]
fn a_reset_gives_one_key_its_whole_quota_back_for_every_algorithm() {
    for spec in SPECS {
        let algorithm: AnyAlgorithm = spec.parse().unwrap();
        resets_one_key(&MemoryStore::<_, String>::new(algorithm), spec);
        resets_one_key(
            &BoxStore::new(MemoryStore::<_, String>::new(algorithm)),
            spec,
        );
        let shared = std::sync::Arc::new(MemoryStore::<_, String>::new(algorithm));
        resets_one_key(&shared, spec);
    }
}

#[cfg(feature = "live")]
#[test]
fn a_reset_of_a_live_store_forgets_the_key_under_any_settings() {
    for spec in SPECS {
        let live = LiveAlgorithm::new(spec.parse::<AnyAlgorithm>().unwrap());
        resets_one_key(&MemoryStore::<_, String>::new(live), spec);
    }
}

#[test]
fn the_reset_future_is_ready_and_a_key_without_state_resets_fine() {
    use std::future::Future;
    let store = MemoryStore::<_, String>::new("gcra 1/1h".parse::<AnyAlgorithm>().unwrap());
    assert!(!store.contains_key("nobody"));
    store.reset("nobody").value().unwrap();
    assert!(store.check("k", 1, 0).value().unwrap().allowed);
    assert!(store.contains_key("k"));
    store.reset("k").value().unwrap();
    let fut = std::future::IntoFuture::into_future(Store::reset(&store, &"k".to_owned()));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = fut;
    assert!(matches!(
        std::pin::Pin::new(&mut fut).poll(&mut cx),
        std::task::Poll::Ready(Ok(()))
    ));
    assert!(store.check("k", 1, 0).value().unwrap().allowed);
}

/// A store that cannot answer at once and does not implement `reset`.
struct Remote;

impl Store<String> for Remote {
    type CheckFuture =
        std::future::Ready<Result<ratelimit_core::Decision, ratelimit_core::StoreError>>;
    type WriteFuture = std::future::Ready<Result<(), ratelimit_core::StoreError>>;
    fn check(
        &self,
        _: &String,
        _: u64,
        _: u64,
    ) -> Answer<Result<ratelimit_core::Decision, ratelimit_core::StoreError>, Self::CheckFuture>
    {
        unreachable!()
    }
    fn refund(
        &self,
        _: &String,
        _: u64,
        _: u64,
        _: u64,
    ) -> Answer<Result<(), ratelimit_core::StoreError>, Self::WriteFuture> {
        unreachable!()
    }
}

impl ratelimit_core::store::Upkeep for Remote {}

#[test]
fn a_store_without_a_reset_says_so() {
    use std::future::{Future, IntoFuture};
    let mut fut = Remote.reset(&"k".to_owned()).into_future();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(&mut fut).poll(&mut cx) {
        std::task::Poll::Ready(Err(e)) => assert_eq!(e.kind(), "unsupported"),
        other => panic!("{other:?}"),
    }
}
