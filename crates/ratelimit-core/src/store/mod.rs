//! Stores: where per-key state lives, and what makes each check atomic.
//!
//! [`Store`] is what the HTTP layer talks to. Each operation gives an
//! [`Answer`]: [`MemoryStore`] answers at once (no
//! future, no await point), remote stores (Redis) with futures to await.
//! [`BoxStore`](crate::BoxStore) erases the type, so that one layer mixes
//! stores. The stores are at the crate root; this module holds their
//! options ([`MemoryStoreBuilder`], [`AtCapacity`]), futures, counts and
//! upkeep.
//!
//! ```
//! use ratelimit_core::store::AtCapacity;
//! use ratelimit_core::{Gcra, MemoryStore};
//! use std::time::Duration;
//!
//! let store: MemoryStore<Gcra, String> =
//!     MemoryStore::builder(Gcra::new(5, Duration::from_secs(60)).unwrap())
//!         .max_keys(Some(1000))
//!         .at_capacity(AtCapacity::Refuse)
//!         .build().unwrap();
//! # let _ = store;
//! ```

pub(crate) mod answer;
mod answer_future;
pub(crate) mod ban;
pub(crate) mod boxed;
mod deny_cache;
mod evicted;
mod evicted_keys;
mod guess;
pub(crate) mod memory;
mod never_pending;
mod prefetch;
mod shard;
mod shard_lock;
mod upkeep;

pub use crate::error::RemoteError;
pub use answer_future::AnswerFuture;
pub use memory::{AtCapacity, MemoryStoreBuilder, DEFAULT_MAX_KEYS};
pub use never_pending::NeverPending;
pub use shard::StoreCounts;
pub use upkeep::Upkeep;

#[cfg(doc)]
use crate::MemoryStore;
use crate::{Answer, Decision, StoreError};
use std::future::Future;
use std::pin::Pin;

/// The future of a pending [`Store::ban_left`].
///
/// ```
/// use ratelimit_core::store::BanLeftFuture;
/// use std::task::{Context, Poll, Waker};
/// use std::time::Duration;
///
/// // What a remote store hands back while it asks.
/// let mut left: BanLeftFuture = Box::pin(async { Ok(Some(Duration::from_secs(5))) });
/// let mut cx = Context::from_waker(Waker::noop());
/// let Poll::Ready(Ok(left)) = left.as_mut().poll(&mut cx) else { panic!() };
/// assert_eq!(left, Some(Duration::from_secs(5)));
/// ```
pub type BanLeftFuture =
    Pin<Box<dyn Future<Output = Result<Option<std::time::Duration>, StoreError>> + Send + 'static>>;

/// The future of a pending [`Store::settle`]: the key's [`Decision`]
/// after the settlement. It is boxed: one per settled request, after its
/// response.
///
/// ```
/// use ratelimit_core::{store::SettleFuture, Answer, Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(1)).unwrap());
/// store.check("alice", 2, 0).value().unwrap();
/// // The request cost 1, not 2: one comes back.
/// let answer: Answer<_, SettleFuture> = store.settle("alice", 2, 1, 0, 0);
/// let Ok(Ok(decision)) = answer.into_ready() else { panic!("a memory store answers at once") };
/// assert!(decision.allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
pub type SettleFuture =
    Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// A `Refused` error of kind `unsupported`: this store cannot `what`.
fn unsupported<T, F>(what: &str) -> Answer<Result<T, StoreError>, F> {
    Answer::ready(Err(StoreError::refused(
        "unsupported",
        format!("this store cannot {what}"),
    )))
}

/// A keyed rate-limit store, local or remote: each operation gives an
/// [`Answer`], ready at once (a memory store's) or a future to await (a
/// remote store's), so that one HTTP layer serves both.
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// store.refund("alice", 1, 0, 0).value().unwrap();
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
///
/// `now` is the caller's clock in nanoseconds; a remote store may use its
/// own clock instead (Redis uses the server's `TIME`, so instances' clocks
/// don't matter) and must say so.
///
/// A store that answers at once answers [`Answer::ready`], and a caller
/// takes the value with [`Answer::into_ready`] without polling (and
/// without holding locks across await points); a store that must wait
/// answers [`Answer::pending`]. What does not depend on a key (upkeep,
/// counts) is the supertrait [`Upkeep`]'s.
pub trait Store<K: ?Sized>: Upkeep + Send + Sync + 'static {
    /// The future of a check that is pending.
    type CheckFuture: Future<Output = Result<Decision, StoreError>> + Send + 'static;
    /// The future of a refund, reset, ban or unban that is pending: a
    /// write that gives back nothing but its success.
    type WriteFuture: Future<Output = Result<(), StoreError>> + Send + 'static;

    /// Decides a request of `cost` for `key` at `now`.
    fn check(
        &self,
        key: &K,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture>;

    /// Gives back `cost` admitted for `key` at `admitted_at`.
    fn refund(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture>;

    /// Settles a request admitted for `key` at `admitted_at` with `reserved`
    /// cost to its `actual` cost, known at `now` (after the response):
    /// - `actual > reserved`: charges `actual - reserved` unconditionally
    ///   ([`Algorithm::charge`](crate::Algorithm::charge)): the key may go into debt, and its next
    ///   checks are denied until the debt is repaid at the refill rate;
    /// - `actual < reserved`: gives back `reserved - actual` admitted at
    ///   `admitted_at`, as [`refund`](Self::refund) does;
    /// - equal: changes nothing.
    ///
    /// The answer is what a peek (a check of cost 0) at `now` tells after
    /// the settlement: `allowed` is false when the key is in debt, with
    /// `wait` the time until the debt is repaid. A ban is untouched (and
    /// not reported here: checks report it).
    ///
    /// The default settles down with [`refund`](Self::refund) then a peek
    /// with [`check`](Self::check) (ready when both are), and refuses to
    /// settle up with a `Refused` error of kind `unsupported` (a store
    /// that cannot charge unconditionally).
    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, SettleFuture> {
        if actual > reserved {
            return unsupported("charge a cost unconditionally");
        }
        let refund =
            (actual < reserved).then(|| self.refund(key, reserved - actual, admitted_at, now));
        refund_then_peek(refund, self.check(key, 0, now))
    }

    /// Forgets `key`'s state, so that its next check starts full, as a
    /// key never seen: an explicit decision of the app or an operator
    /// (after a successful login, a password reset) that gives the key's
    /// used quota back. Other keys are untouched. The default fails with
    /// a `Refused` error of kind `unsupported`.
    fn reset(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let _ = key;
        unsupported("reset a key")
    }

    /// Bans `key` for `duration` from `now`: every check of it is denied
    /// until then, whatever the algorithm says, with
    /// [`Decision::banned`] set and `wait` the ban's remaining time. A
    /// ban replaces one already standing. The default fails as
    /// [`reset`](Self::reset)'s does.
    fn ban(
        &self,
        key: &K,
        duration: std::time::Duration,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let _ = (key, duration, now);
        unsupported("ban a key")
    }

    /// Lifts `key`'s ban, if any (what it has used stays used). The
    /// default fails as [`reset`](Self::reset)'s does.
    fn unban(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        let _ = key;
        unsupported("unban a key")
    }

    /// What is left at `now` of `key`'s ban, if it is banned (for
    /// operators; checks answer bans themselves). The default fails with
    /// a `Refused` error of kind `unsupported`.
    fn ban_left(
        &self,
        key: &K,
        now: u64,
    ) -> Answer<Result<Option<std::time::Duration>, StoreError>, BanLeftFuture> {
        let _ = (key, now);
        unsupported("read a key's ban")
    }
}

/// The default settlement's answer: `refund`'s (if any), then `peek`'s;
/// ready when both are.
fn refund_then_peek<R, C>(
    refund: Option<Answer<Result<(), StoreError>, R>>,
    peek: Answer<Result<Decision, StoreError>, C>,
) -> Answer<Result<Decision, StoreError>, SettleFuture>
where
    R: Future<Output = Result<(), StoreError>> + Send + 'static,
    C: Future<Output = Result<Decision, StoreError>> + Send + 'static,
{
    let refund = match refund.map(Answer::into_ready) {
        None | Some(Ok(Ok(()))) => None,
        Some(Ok(Err(e))) => return Answer::ready(Err(e)),
        Some(Err(pending)) => Some(pending),
    };
    match (refund, peek.into_ready()) {
        (None, Ok(peeked)) => Answer::ready(peeked),
        (refund, peek) => Answer::pending(Box::pin(async move {
            if let Some(refund) = refund {
                refund.await?;
            }
            match peek {
                Ok(peeked) => peeked,
                Err(pending) => pending.await,
            }
        })),
    }
}

/// A shared store is a store: the app keeps an `Arc` of a store it hands
/// to a layer (or a policy table) and reaches it while the layer runs (to
/// read its state, reset a key, and so on).
impl<K: ?Sized, S: Store<K> + ?Sized> Store<K> for std::sync::Arc<S> {
    type CheckFuture = S::CheckFuture;
    type WriteFuture = S::WriteFuture;

    #[inline(always)]
    fn check(
        &self,
        key: &K,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        (**self).check(key, cost, now)
    }

    #[inline]
    fn refund(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        (**self).refund(key, cost, admitted_at, now)
    }

    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, SettleFuture> {
        (**self).settle(key, reserved, actual, admitted_at, now)
    }

    fn reset(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        (**self).reset(key)
    }

    fn ban(
        &self,
        key: &K,
        duration: std::time::Duration,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        (**self).ban(key, duration, now)
    }

    fn unban(&self, key: &K) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        (**self).unban(key)
    }

    fn ban_left(
        &self,
        key: &K,
        now: u64,
    ) -> Answer<Result<Option<std::time::Duration>, StoreError>, BanLeftFuture> {
        (**self).ban_left(key, now)
    }
}
