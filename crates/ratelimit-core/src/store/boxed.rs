//! [`BoxStore`]: a store with its type erased, so one layer mixes stores.

use super::{BanLeftFuture, SettleFuture, Store, StoreCounts, Upkeep};
use crate::Answer;
use crate::{Decision, StoreError};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A boxed future, as [`BoxStore`]'s pending checks and refunds are.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A check's answer with its pending future boxed.
type BoxCheck = Answer<Result<Decision, StoreError>, BoxFuture<Result<Decision, StoreError>>>;

/// A refund's, reset's, ban's or unban's answer with its pending future
/// boxed.
type BoxRefund = Answer<Result<(), StoreError>, BoxFuture<Result<(), StoreError>>>;

/// [`Store`] with its futures boxed: what [`BoxStore`] holds.
trait DynStore<K: ?Sized>: Send + Sync + 'static {
    fn check(&self, key: &K, cost: u64, now: u64) -> BoxCheck;
    fn refund(&self, key: &K, cost: u64, at: u64, now: u64) -> BoxRefund;
    fn settle(&self, key: &K, reserved: u64, actual: u64, at: u64, now: u64) -> Settled;
    fn reset(&self, key: &K) -> BoxRefund;
    fn ban(&self, key: &K, duration: Duration, now: u64) -> BoxRefund;
    fn unban(&self, key: &K) -> BoxRefund;
    fn ban_left(&self, key: &K, now: u64) -> BanLeft;
    fn maintain(&self, now: u64) -> usize;
    fn counts(&self) -> Option<StoreCounts>;
    fn algorithm_names(&self) -> Vec<&'static str>;
}

/// A settlement's answer.
type Settled = Answer<Result<Decision, StoreError>, SettleFuture>;

/// A ban's time left, answered.
type BanLeft = Answer<Result<Option<Duration>, StoreError>, BanLeftFuture>;

impl<K: ?Sized, S: Store<K>> DynStore<K> for S {
    #[inline]
    fn check(&self, key: &K, cost: u64, now: u64) -> BoxCheck {
        Store::check(self, key, cost, now).map_pending(|f| Box::pin(f) as BoxFuture<_>)
    }

    fn refund(&self, key: &K, cost: u64, at: u64, now: u64) -> BoxRefund {
        Store::refund(self, key, cost, at, now).map_pending(|f| Box::pin(f) as BoxFuture<_>)
    }

    fn settle(&self, key: &K, reserved: u64, actual: u64, at: u64, now: u64) -> Settled {
        Store::settle(self, key, reserved, actual, at, now)
    }

    fn reset(&self, key: &K) -> BoxRefund {
        Store::reset(self, key).map_pending(|f| Box::pin(f) as BoxFuture<_>)
    }

    fn ban(&self, key: &K, duration: Duration, now: u64) -> BoxRefund {
        Store::ban(self, key, duration, now).map_pending(|f| Box::pin(f) as BoxFuture<_>)
    }

    fn unban(&self, key: &K) -> BoxRefund {
        Store::unban(self, key).map_pending(|f| Box::pin(f) as BoxFuture<_>)
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeft {
        Store::ban_left(self, key, now)
    }

    fn maintain(&self, now: u64) -> usize {
        Upkeep::maintain(self, now)
    }

    fn counts(&self) -> Option<StoreCounts> {
        Upkeep::counts(self)
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        Upkeep::algorithm_names(self)
    }
}

/// Any [`Store`] for keys `K`, its type erased (in the spirit of tower's
/// `BoxCloneService`), so that one HTTP layer can keep limits in different
/// stores: a [`MemoryStore`](crate::MemoryStore) of one algorithm, another
/// of a different one, a remote store.
///
/// Pending checks and refunds are boxed (an allocation each), while
/// ready answers go through as they are, so a memory store still
/// answers at once without a future. Cloning shares the store.
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
///     // A memory store's answer is ready, through the box too.
///     let decided = store.check(&7, 1, 0).into_ready().ok().expect("ready");
///     assert!(decided.unwrap().allowed);
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
    type WriteFuture = BoxFuture<Result<(), StoreError>>;

    #[inline]
    fn check(&self, key: &K, cost: u64, now: u64) -> BoxCheck {
        self.inner.check(key, cost, now)
    }

    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> BoxRefund {
        self.inner.refund(key, cost, admitted_at, now)
    }

    fn settle(&self, key: &K, reserved: u64, actual: u64, admitted_at: u64, now: u64) -> Settled {
        self.inner.settle(key, reserved, actual, admitted_at, now)
    }

    fn reset(&self, key: &K) -> BoxRefund {
        self.inner.reset(key)
    }

    fn ban(&self, key: &K, duration: Duration, now: u64) -> BoxRefund {
        self.inner.ban(key, duration, now)
    }

    fn unban(&self, key: &K) -> BoxRefund {
        self.inner.unban(key)
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeft {
        self.inner.ban_left(key, now)
    }
}

impl<K: ?Sized + 'static> Upkeep for BoxStore<K> {
    fn maintain(&self, now: u64) -> usize {
        self.inner.maintain(now)
    }

    fn counts(&self) -> Option<StoreCounts> {
        self.inner.counts()
    }

    fn algorithm_names(&self) -> Vec<&'static str> {
        self.inner.algorithm_names()
    }
}
