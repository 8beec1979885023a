//! `BoxStore`: a memory store keeps its at-once answers through the box; a
//! store with pending futures works through it too; `maintain` goes
//! through.

use ratelimit_core::store::Upkeep;
use ratelimit_core::{Answer, BoxStore, Decision, Gcra, MemoryStore, Store, StoreError};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Ready on its second poll (waking the task on its first).
struct Later<T>(Option<T>, bool);

impl<T: Unpin> Future for Later<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if !self.1 {
            self.1 = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(self.0.take().expect("polled after completion"))
    }
}

/// A store whose answers take a poll: a memory store behind futures that
/// are pending once, no answer at once, and a count of `maintain` calls.
struct Remote {
    memory: MemoryStore<Gcra, u64>,
    maintained: Arc<AtomicU64>,
}

impl Store<u64> for Remote {
    type CheckFuture = Later<Result<Decision, StoreError>>;
    type WriteFuture = Later<Result<(), StoreError>>;

    fn check(
        &self,
        key: &u64,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        Answer::pending(Later(
            Some(self.memory.check(key, cost, now).value()),
            false,
        ))
    }

    fn refund(
        &self,
        key: &u64,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.memory
            .refund(key, cost, admitted_at, now)
            .value()
            .unwrap();
        Answer::pending(Later(Some(Ok(())), false))
    }
}

impl Upkeep for Remote {
    fn maintain(&self, now: u64) -> usize {
        self.maintained.fetch_add(1, Ordering::Relaxed);
        self.memory.maintain(now)
    }
}

/// Polls `fut` to completion, counting the polls.
fn block_on<F: IntoFuture>(fut: F) -> (F::Output, usize) {
    let mut fut = std::pin::pin!(fut.into_future());
    let mut cx = Context::from_waker(Waker::noop());
    for polls in 1..100 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return (v, polls);
        }
    }
    panic!("never ready");
}

fn gcra() -> Gcra {
    Gcra::new(2, Duration::from_secs(1)).unwrap()
}

#[test]
fn memory_store_answers_at_once_through_the_box() {
    let store = BoxStore::new(MemoryStore::<_, u64>::new(gcra()));
    let a = store
        .check(&1, 1, 0)
        .into_ready()
        .ok()
        .expect("answers at once")
        .unwrap();
    let b = store
        .check(&1, 1, 0)
        .into_ready()
        .ok()
        .expect("answers at once")
        .unwrap();
    let c = store
        .check(&1, 1, 0)
        .into_ready()
        .ok()
        .expect("answers at once")
        .unwrap();
    assert!(a.allowed && b.allowed && !c.allowed);
    assert_eq!(b.remaining, 0);
    assert_eq!(b.next, Duration::from_millis(500));
    assert_eq!(c.retry_after(), Some(b.next));
    assert!(store
        .refund(&1, 1, 0, 0)
        .into_ready()
        .ok()
        .expect("at once")
        .is_ok());
    // The future path reaches the same store: the refund left one.
    let (d, polls) = block_on(store.check(&1, 1, 0));
    assert_eq!(polls, 1);
    assert!(d.unwrap().allowed);
    let (d, _) = block_on(store.clone().check(&1, 1, 0));
    assert!(!d.unwrap().allowed, "clones share the store");
}

#[test]
fn pending_store_through_the_box() {
    let maintained = Arc::new(AtomicU64::new(0));
    let store = BoxStore::new(Remote {
        memory: MemoryStore::new(gcra()),
        maintained: Arc::clone(&maintained),
    });
    assert!(
        store.check(&1, 1, 0).into_ready().ok().is_none(),
        "no answer at once"
    );
    assert!(
        store.refund(&1, 1, 0, 0).into_ready().ok().is_none(),
        "no refund at once"
    );
    let (a, polls) = block_on(store.check(&1, 2, 0));
    assert_eq!(polls, 2);
    let a = a.unwrap();
    assert!(a.allowed);
    assert_eq!(a.remaining, 0);
    let (denied, _) = block_on(store.check(&1, 1, 0));
    assert_eq!(denied.unwrap().retry_after(), Some(a.next));
    let (refund, polls) = block_on(store.refund(&1, 2, 0, 0));
    assert!(refund.is_ok());
    assert_eq!(polls, 2);
    let (b, _) = block_on(store.check(&1, 2, 0));
    assert!(b.unwrap().allowed, "refunded");
    store.maintain(5);
    store.maintain(6);
    assert_eq!(maintained.load(Ordering::Relaxed), 2);
}

#[test]
fn one_type_for_different_stores() {
    let stores: Vec<BoxStore<u64>> = vec![
        BoxStore::new(MemoryStore::<_, u64>::new(gcra())),
        BoxStore::new(Remote {
            memory: MemoryStore::new(gcra()),
            maintained: Arc::default(),
        }),
    ];
    for store in &stores {
        let d = match store.check(&9, 1, 0).into_ready().ok() {
            Some(d) => d,
            None => block_on(store.check(&9, 1, 0)).0,
        };
        assert!(d.unwrap().allowed);
    }
}
