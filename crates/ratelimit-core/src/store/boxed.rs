//! [`BoxStore`]: a store with its type erased, so one layer mixes stores.

use super::{AdminFuture, BanLeftFuture, SettleFuture, Store, StoreCounts};
use crate::{Decision, StoreError};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A boxed future, as [`BoxStore`]'s checks and refunds return.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// [`Store`] with its futures boxed: what [`BoxStore`] holds.
trait DynStore<K: ?Sized>: Send + Sync + 'static {
    fn check(&self, key: &K, cost: u64, now: u64) -> BoxFuture<Result<Decision, StoreError>>;
    fn refund(&self, key: &K, cost: u64, at: u64, now: u64) -> BoxFuture<Result<(), StoreError>>;
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>>;
    fn refund_now(&self, key: &K, cost: u64, at: u64, now: u64) -> Option<Result<(), StoreError>>;
    fn settle(&self, key: &K, reserved: u64, actual: u64, at: u64, now: u64) -> SettleFuture;
    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>>;
    fn reset(&self, key: &K) -> AdminFuture;
    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>>;
    fn ban(&self, key: &K, duration: Duration, now: u64) -> AdminFuture;
    fn ban_now(&self, key: &K, duration: Duration, now: u64) -> Option<Result<(), StoreError>>;
    fn unban(&self, key: &K) -> AdminFuture;
    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>>;
    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture;
    fn maintain(&self, now: u64);
    fn counts(&self) -> Option<StoreCounts>;
}

impl<K: ?Sized, S: Store<K>> DynStore<K> for S {
    fn check(&self, key: &K, cost: u64, now: u64) -> BoxFuture<Result<Decision, StoreError>> {
        Box::pin(Store::check(self, key, cost, now))
    }

    fn refund(&self, key: &K, cost: u64, at: u64, now: u64) -> BoxFuture<Result<(), StoreError>> {
        Box::pin(Store::refund(self, key, cost, at, now))
    }

    #[inline]
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>> {
        Store::check_now(self, key, cost, now)
    }

    fn refund_now(&self, key: &K, cost: u64, at: u64, now: u64) -> Option<Result<(), StoreError>> {
        Store::refund_now(self, key, cost, at, now)
    }

    fn settle(&self, key: &K, reserved: u64, actual: u64, at: u64, now: u64) -> SettleFuture {
        Store::settle(self, key, reserved, actual, at, now)
    }

    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        Store::settle_now(self, key, reserved, actual, at, now)
    }

    fn reset(&self, key: &K) -> AdminFuture {
        Store::reset(self, key)
    }

    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        Store::reset_now(self, key)
    }

    fn ban(&self, key: &K, duration: Duration, now: u64) -> AdminFuture {
        Store::ban(self, key, duration, now)
    }

    fn ban_now(&self, key: &K, duration: Duration, now: u64) -> Option<Result<(), StoreError>> {
        Store::ban_now(self, key, duration, now)
    }

    fn unban(&self, key: &K) -> AdminFuture {
        Store::unban(self, key)
    }

    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        Store::unban_now(self, key)
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        Store::ban_left(self, key, now)
    }

    fn maintain(&self, now: u64) {
        Store::maintain(self, now);
    }

    fn counts(&self) -> Option<StoreCounts> {
        Store::counts(self)
    }
}

/// Any [`Store`] for keys `K`, its type erased (in the spirit of tower's
/// `BoxCloneService`), so that one HTTP layer can keep limits in different
/// stores: a [`MemoryStore`](crate::MemoryStore) of one algorithm, another
/// of a different one, a remote store.
///
/// Checks and refunds return boxed futures (an allocation each), but
/// [`check_now`](Store::check_now) and [`refund_now`](Store::refund_now)
/// go through to the store, so a memory store still answers at once
/// without a future. [`maintain`](Store::maintain) goes through too.
/// Cloning shares the store.
///
/// ```
/// use ratelimit_core::{BoxStore, FixedWindow, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// // Two algorithms, one store type.
/// let burst: BoxStore<u64> =
///     BoxStore::new(MemoryStore::new(Gcra::new(10, Duration::from_secs(1)).unwrap()));
/// let daily: BoxStore<u64> = BoxStore::new(MemoryStore::new(
///     FixedWindow::new(1000, Duration::from_secs(86_400)).unwrap(),
/// ));
/// for store in [&burst, &daily] {
///     let d = store.check_now(&7, 1, 0).unwrap().unwrap();
///     assert!(d.allowed);
/// }
/// ```
pub struct BoxStore<K: ?Sized> {
    inner: Arc<dyn DynStore<K>>,
}

impl<K: ?Sized + 'static> BoxStore<K> {
    /// `store`, its type erased.
    pub fn new<S: Store<K>>(store: S) -> Self {
        Self {
            inner: Arc::new(store),
        }
    }
}

impl<K: ?Sized> Clone for BoxStore<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: ?Sized> fmt::Debug for BoxStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoxStore").finish_non_exhaustive()
    }
}

impl<K: ?Sized + 'static> Store<K> for BoxStore<K> {
    type CheckFuture = BoxFuture<Result<Decision, StoreError>>;
    type RefundFuture = BoxFuture<Result<(), StoreError>>;

    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture {
        self.inner.check(key, cost, now)
    }

    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture {
        self.inner.refund(key, cost, admitted_at, now)
    }

    #[inline]
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>> {
        self.inner.check_now(key, cost, now)
    }

    fn refund_now(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        self.inner.refund_now(key, cost, admitted_at, now)
    }

    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> SettleFuture {
        self.inner.settle(key, reserved, actual, admitted_at, now)
    }

    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        self.inner
            .settle_now(key, reserved, actual, admitted_at, now)
    }

    fn reset(&self, key: &K) -> AdminFuture {
        self.inner.reset(key)
    }

    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        self.inner.reset_now(key)
    }

    fn ban(&self, key: &K, duration: Duration, now: u64) -> AdminFuture {
        self.inner.ban(key, duration, now)
    }

    fn ban_now(&self, key: &K, duration: Duration, now: u64) -> Option<Result<(), StoreError>> {
        self.inner.ban_now(key, duration, now)
    }

    fn unban(&self, key: &K) -> AdminFuture {
        self.inner.unban(key)
    }

    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        self.inner.unban_now(key)
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        self.inner.ban_left(key, now)
    }

    fn maintain(&self, now: u64) {
        self.inner.maintain(now);
    }

    fn counts(&self) -> Option<StoreCounts> {
        self.inner.counts()
    }
}
