//! One key's budget in a store, seen by a paced body without the key's or the store's type.

use ratelimit_core::{Answer, Decision, Store, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The future of a [`Budget::check`] (boxed: one per piece, and only for a
/// store that cannot answer at once).
pub(crate) type BudgetFuture =
    Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send + 'static>>;

/// Charges one key's budget: what a [`PacedBody`](super::PacedBody) needs
/// of the key and its store.
pub(crate) trait Budget: Send + Sync + 'static {
    /// The store's [`check`](Store::check) of `cost` at `now`, its future
    /// boxed if it is pending.
    fn check(&self, cost: u64, now: u64) -> Answer<Result<Decision, StoreError>, BudgetFuture>;
}

/// A key and the store holding its budget.
pub(crate) struct KeyBudget<K, St> {
    pub(crate) key: K,
    pub(crate) store: Arc<St>,
}

impl<K, St> Budget for KeyBudget<K, St>
where
    K: Send + Sync + 'static,
    St: Store<K>,
{
    fn check(&self, cost: u64, now: u64) -> Answer<Result<Decision, StoreError>, BudgetFuture> {
        self.store
            .check(&self.key, cost, now)
            .map_pending(|f| Box::pin(f) as BudgetFuture)
    }
}
