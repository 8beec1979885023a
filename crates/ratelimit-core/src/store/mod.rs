//! Stores: where per-key state lives, and what makes each check atomic.
//!
//! [`Store`] is what the HTTP layer talks to; [`MemoryStore`] implements
//! it with ready futures (no allocation, no await point) and answers at
//! once through [`Store::check_now`], and remote stores (Redis) with real
//! futures. [`BoxStore`](crate::BoxStore) erases the type, so that one layer mixes stores.
//! The stores are at the crate root; this module holds their options
//! ([`MemoryStoreBuilder`], [`AtCapacity`]), futures and counts.
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
//!         .build();
//! # let _ = store;
//! ```

pub(crate) mod ban;
pub(crate) mod boxed;
mod deny_cache;
mod evicted;
mod evicted_keys;
mod guess;
pub(crate) mod memory;
mod prefetch;
mod shard;
mod shard_lock;
mod sync_names;

pub use crate::error::RemoteError;
pub use memory::{AtCapacity, MemoryStoreBuilder};
pub use shard::StoreCounts;

#[cfg(doc)]
use crate::MemoryStore;
use crate::{Decision, StoreError};
use std::future::{ready, Future};
use std::pin::Pin;

/// The future of a [`Store::reset`], [`Store::ban`] or [`Store::unban`]:
/// boxed, as these are rare (an operator's or the app's decision, not
/// every request's).
pub type AdminFuture = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'static>>;

/// The future of a [`Store::ban_left`].
pub type BanLeftFuture =
    Pin<Box<dyn Future<Output = Result<Option<std::time::Duration>, StoreError>> + Send + 'static>>;

/// The future of a [`Store::settle`]: the key's [`Decision`] after the
/// settlement (boxed: one per settled request, after its response).
pub type SettleFuture =
    Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// `answer` as a ready future; none (a store that cannot `what` a key at
/// once) is a `Refused` error of kind `unsupported`.
fn ready_or_unsupported(answer: Option<Result<(), StoreError>>, what: &str) -> AdminFuture {
    let answer = answer.unwrap_or_else(|| {
        Err(StoreError::refused(
            "unsupported",
            format!("this store cannot {what} a key"),
        ))
    });
    Box::pin(ready(answer))
}

/// A keyed rate-limit store, local or remote, seen through futures so that
/// one HTTP layer serves both.
///
/// `now` is the caller's clock in nanoseconds; a remote store may use its
/// own clock instead (Redis uses the server's `TIME`, so instances' clocks
/// don't matter) and must say so.
pub trait Store<K: ?Sized>: Send + Sync + 'static {
    /// The future of a check.
    type CheckFuture: Future<Output = Result<Decision, StoreError>> + Send + 'static;
    /// The future of a refund.
    type RefundFuture: Future<Output = Result<(), StoreError>> + Send + 'static;

    /// Decides a request of `cost` for `key` at `now`.
    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture;

    /// Gives back `cost` admitted for `key` at `admitted_at`.
    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture;

    /// The check, done at once, for a store that can answer without
    /// waiting (a memory store): `Some` with what [`check`](Self::check)'s
    /// future would give, the check done; or `None`, nothing done, and the
    /// caller uses [`check`](Self::check). The default is `None`; a store
    /// that returns `Some` must do so on every call, so callers can skip
    /// futures (and locks held across them) entirely.
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>> {
        let _ = (key, cost, now);
        None
    }

    /// The refund, done at once, as [`check_now`](Self::check_now) is for
    /// checks: `Some` when done, `None` (the default) when the caller must
    /// use [`refund`](Self::refund).
    fn refund_now(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        let _ = (key, cost, admitted_at, now);
        None
    }

    /// Settles a request admitted for `key` at `admitted_at` with `reserved`
    /// cost to its `actual` cost, known at `now` (after the response):
    /// - `actual > reserved`: charges `actual - reserved` unconditionally
    ///   ([`Algorithm::charge`](crate::Algorithm::charge)): the key may go into debt, and its next
    ///   checks are denied until the debt is repaid at the refill rate;
    /// - `actual < reserved`: gives back `reserved - actual` admitted at
    ///   `admitted_at`, as [`refund`](Self::refund) does;
    /// - equal: changes nothing.
    ///
    /// The future gives what a peek (a check of cost 0) at `now` tells
    /// after the settlement: `allowed` is false when the key is in debt,
    /// with `wait` the time until the debt is repaid. A ban is untouched
    /// (and not reported here: checks report it).
    ///
    /// The default uses [`settle_now`](Self::settle_now) if it answers;
    /// otherwise it settles down with [`refund`](Self::refund) then a peek
    /// with [`check`](Self::check), and refuses to settle up with a
    /// `Refused` error of kind `unsupported` (a store that cannot charge
    /// unconditionally).
    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> SettleFuture {
        if let Some(done) = self.settle_now(key, reserved, actual, admitted_at, now) {
            return Box::pin(ready(done));
        }
        if actual > reserved {
            return Box::pin(ready(Err(StoreError::refused(
                "unsupported",
                "this store cannot charge a cost unconditionally",
            ))));
        }
        let refund =
            (actual < reserved).then(|| self.refund(key, reserved - actual, admitted_at, now));
        let peek = self.check(key, 0, now);
        Box::pin(async move {
            if let Some(refund) = refund {
                refund.await?;
            }
            peek.await
        })
    }

    /// The settlement, done at once, as [`check_now`](Self::check_now) is
    /// for checks: `Some` with what [`settle`](Self::settle)'s future would
    /// give, `None` (the default) when the caller must use
    /// [`settle`](Self::settle).
    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        let _ = (key, reserved, actual, admitted_at, now);
        None
    }

    /// Forgets `key`'s state, so that its next check starts full, as a
    /// key never seen: an explicit decision of the app or an operator
    /// (after a successful login, a password reset) that gives the key's
    /// used quota back. Other keys are untouched. The default uses
    /// [`reset_now`](Self::reset_now), and fails with a `Refused` error
    /// of kind `unsupported` for a store that cannot answer at once.
    fn reset(&self, key: &K) -> AdminFuture {
        ready_or_unsupported(self.reset_now(key), "reset")
    }

    /// The reset, done at once, as [`check_now`](Self::check_now) is for
    /// checks: `Some` when done, `None` (the default) when the caller must
    /// use [`reset`](Self::reset).
    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        let _ = key;
        None
    }

    /// Bans `key` for `duration` from `now`: every check of it is denied
    /// until then, whatever the algorithm says, with
    /// [`Decision::banned`] set and `wait` the ban's remaining time. A
    /// ban replaces one already standing. The default uses
    /// [`ban_now`](Self::ban_now).
    fn ban(&self, key: &K, duration: std::time::Duration, now: u64) -> AdminFuture {
        ready_or_unsupported(self.ban_now(key, duration, now), "ban")
    }

    /// The ban, done at once (`None`, the default: use [`ban`](Self::ban)).
    fn ban_now(
        &self,
        key: &K,
        duration: std::time::Duration,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        let _ = (key, duration, now);
        None
    }

    /// Lifts `key`'s ban, if any (what it has used stays used). The
    /// default uses [`unban_now`](Self::unban_now).
    fn unban(&self, key: &K) -> AdminFuture {
        ready_or_unsupported(self.unban_now(key), "unban")
    }

    /// The unban, done at once (`None`, the default: use
    /// [`unban`](Self::unban)).
    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        let _ = key;
        None
    }

    /// What is left at `now` of `key`'s ban, if it is banned (for
    /// operators; checks answer bans themselves). The default fails with
    /// a `Refused` error of kind `unsupported`.
    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        let _ = (key, now);
        Box::pin(ready(Err(StoreError::refused(
            "unsupported",
            "this store cannot read a key's ban",
        ))))
    }

    /// Bounded upkeep at `now`, called every second or so by whoever owns
    /// the store (the HTTP layer does, on tokio): a memory store drops
    /// keys that are back to full and gives memory back. The default does
    /// nothing.
    fn maintain(&self, now: u64) {
        let _ = now;
    }

    /// How many keys the store holds here and what eviction at its cap
    /// did ([`MemoryStore::counts`]), for upkeep to report; `None` (the
    /// default) for a store that keeps no keys in this process.
    fn counts(&self) -> Option<StoreCounts> {
        None
    }
}

/// A shared store is a store: the app keeps an `Arc` of a store it hands
/// to a layer (or a policy table) and reaches it while the layer runs (to
/// read its state, reset a key, and so on).
impl<K: ?Sized, S: Store<K> + ?Sized> Store<K> for std::sync::Arc<S> {
    type CheckFuture = S::CheckFuture;
    type RefundFuture = S::RefundFuture;

    #[inline]
    fn check(&self, key: &K, cost: u64, now: u64) -> Self::CheckFuture {
        (**self).check(key, cost, now)
    }

    fn refund(&self, key: &K, cost: u64, admitted_at: u64, now: u64) -> Self::RefundFuture {
        (**self).refund(key, cost, admitted_at, now)
    }

    #[inline]
    fn check_now(&self, key: &K, cost: u64, now: u64) -> Option<Result<Decision, StoreError>> {
        (**self).check_now(key, cost, now)
    }

    fn refund_now(
        &self,
        key: &K,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        (**self).refund_now(key, cost, admitted_at, now)
    }

    fn settle(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> SettleFuture {
        (**self).settle(key, reserved, actual, admitted_at, now)
    }

    fn settle_now(
        &self,
        key: &K,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        (**self).settle_now(key, reserved, actual, admitted_at, now)
    }

    fn reset(&self, key: &K) -> AdminFuture {
        (**self).reset(key)
    }

    fn reset_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        (**self).reset_now(key)
    }

    fn ban(&self, key: &K, duration: std::time::Duration, now: u64) -> AdminFuture {
        (**self).ban(key, duration, now)
    }

    fn ban_now(
        &self,
        key: &K,
        duration: std::time::Duration,
        now: u64,
    ) -> Option<Result<(), StoreError>> {
        (**self).ban_now(key, duration, now)
    }

    fn unban(&self, key: &K) -> AdminFuture {
        (**self).unban(key)
    }

    fn unban_now(&self, key: &K) -> Option<Result<(), StoreError>> {
        (**self).unban_now(key)
    }

    fn ban_left(&self, key: &K, now: u64) -> BanLeftFuture {
        (**self).ban_left(key, now)
    }

    fn maintain(&self, now: u64) {
        (**self).maintain(now);
    }

    fn counts(&self) -> Option<StoreCounts> {
        (**self).counts()
    }
}
