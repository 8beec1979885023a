//! The state every clone of a layer and its services shares.

use crate::key::KeyExtractor;
use crate::response::Fields;
use crate::strategy::{
    Cost, FailurePolicy, KeyErrorPolicy, LimitSelector, Mode, ResponsePredicate,
};
use crate::summary::Summary;
use ratelimit_core::Clock;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One named limit: a store and the name used in headers.
pub(crate) struct Limit<St> {
    pub(crate) name: &'static str,
    pub(crate) store: Arc<St>,
    /// Its once-a-minute `info` line of refusals.
    pub(crate) summary: &'static Summary,
}

impl<St> Limit<St> {
    pub(crate) fn new(name: &'static str, store: Arc<St>) -> Self {
        Self {
            name,
            store,
            summary: Summary::leak(name),
        }
    }
}

/// Locks that make a multi-limit check atomic per key (for stores whose
/// checks complete at once, like `MemoryStore`).
pub(crate) struct Stripes {
    locks: Box<[Mutex<()>]>,
    hasher: RandomState,
}

impl Stripes {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            locks: (0..n.next_power_of_two()).map(|_| Mutex::new(())).collect(),
            hasher: RandomState::new(),
        }
    }

    pub(crate) fn lock<K: Hash>(&self, key: &K) -> MutexGuard<'_, ()> {
        let i = self.hasher.hash_one(key) as usize & (self.locks.len() - 1);
        self.locks[i].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct Shared<X: KeyExtractor, St, R> {
    pub(crate) key: X,
    pub(crate) limits: Box<[Limit<St>]>,
    /// Bit mask of every configured limit.
    pub(crate) all: u64,
    pub(crate) cost: Option<Box<dyn Cost>>,
    pub(crate) select: Option<Box<dyn LimitSelector<X::Key>>>,
    pub(crate) count_if: Option<Box<dyn ResponsePredicate>>,
    /// Responses that reset the key on the limits that admitted it.
    pub(crate) reset_if: Option<Box<dyn ResponsePredicate>>,
    /// Where the actual cost is read after the response, to settle the
    /// estimate (the cost) to it; `None`: the cost is final.
    pub(crate) settle: Option<crate::CostFrom>,
    pub(crate) refund_on_inner_limit: bool,
    pub(crate) mode: Mode,
    pub(crate) on_key_error: KeyErrorPolicy,
    pub(crate) on_store_error: FailurePolicy,
    /// The header fields, with what the settings fix already rendered.
    pub(crate) fields: Fields,
    pub(crate) response: R,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) stripes: Option<Stripes>,
    /// One limit, enforced, nothing to give back: an admitted request goes
    /// straight on (the fast path of `RateLimit::call`).
    pub(crate) plain: bool,
    /// Whether a request without a peer address has been logged.
    pub(crate) no_peer_logged: AtomicBool,
    /// Whether a selection of a limit the layer does not have has been
    /// logged.
    pub(crate) stray_logged: AtomicBool,
}

impl<X: KeyExtractor, St, R> Shared<X, St, R> {
    /// The limits that check the request, a bit each: every limit, less
    /// those the selector leaves out. A selection of a limit the layer
    /// does not have checks every limit, and is logged once.
    #[inline]
    pub(crate) fn selection(&self, parts: &http::request::Parts, key: &X::Key) -> u64 {
        match &self.select {
            Some(select) => select
                .select(parts, key)
                .within(self.all)
                .unwrap_or_else(|all| {
                    crate::observe::stray_selection_once(self.limits.len(), &self.stray_logged);
                    all
                }),
            None => self.all,
        }
    }

    /// What the request costs (1 without a cost function).
    #[inline]
    pub(crate) fn cost_of(&self, parts: &http::request::Parts) -> u64 {
        self.cost.as_ref().map_or(1, |c| c.cost(parts))
    }
}
