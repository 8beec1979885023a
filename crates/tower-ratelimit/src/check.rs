//! Checking a request against its limits: all of them admit, or none consumes.

use crate::key::KeyExtractor;
use crate::observe;
use crate::shared::{Limit, Shared};
use crate::strategy::FailurePolicy;
use ratelimit_core::{Decision, Store, StoreError};
use smallvec::SmallVec;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The outcome of checking every selected limit.
pub(crate) enum Verdict {
    /// Every limit admitted (or failed open).
    Admitted,
    /// The last entry denied; the earlier ones were refunded.
    Denied,
    /// A store failed and the policy is fail-closed; the earlier ones were
    /// refunded.
    Unavailable(StoreError),
}

/// What a checked request spends: its key and cost, at `now`.
pub(crate) struct Spent<K> {
    pub(crate) key: K,
    pub(crate) cost: u64,
    pub(crate) now: u64,
}

/// One limit's answer: its decision, if it gave one, and the verdict it
/// settles, if any (a denial, or a failure under a fail-closed `policy`).
/// A store that refuses new keys at its cap refuses whatever the policy:
/// failing open would admit every new key, unlimited.
#[inline]
pub(crate) fn outcome(
    result: Result<Decision, StoreError>,
    name: &'static str,
    policy: FailurePolicy,
) -> (Option<Decision>, Option<Verdict>) {
    match result {
        Ok(d) => (Some(d), (!d.allowed).then_some(Verdict::Denied)),
        Err(e) => {
            let refused = matches!(e, StoreError::CapacityExceeded { .. });
            let open = policy == FailurePolicy::Open && !refused;
            observe::store_error(name, &e, open);
            (None, (!open).then_some(Verdict::Unavailable(e)))
        }
    }
}

enum Step<C, F> {
    Next,
    Check(usize, C),
    Refund(usize, F),
}

/// Checks the selected limits one after the other; when one denies (or
/// fails closed), refunds those already admitted. A state machine that
/// completes at once, without a future, when the stores answer at once
/// (their [`Answer`](ratelimit_core::Answer)s are ready).
pub(crate) struct Checker<K, St: Store<K>> {
    spent: Spent<K>,
    /// The selected limits not yet checked, a bit each.
    pending: u64,
    step: Step<St::CheckFuture, St::WriteFuture>,
    /// `(limit index, decision)`, in check order.
    entries: SmallVec<[(usize, Decision); 2]>,
    verdict: Option<Verdict>,
    refund_from: usize,
}

impl<K, St> Checker<K, St>
where
    St: Store<K>,
    St::CheckFuture: Unpin,
    St::WriteFuture: Unpin,
{
    /// A checker of the limits in `selection` (a bit each).
    pub(crate) fn new(spent: Spent<K>, selection: u64) -> Self {
        Self {
            spent,
            pending: selection,
            step: Step::Next,
            entries: SmallVec::new(),
            verdict: None,
            refund_from: 0,
        }
    }

    /// A one-limit checker whose check is under way (`fut`).
    pub(crate) fn resume(spent: Spent<K>, fut: St::CheckFuture) -> Self {
        let mut checker = Self::new(spent, 0);
        checker.step = Step::Check(0, fut);
        checker
    }

    /// What the request spent, and `(limit index, decision)` in check
    /// order.
    pub(crate) fn into_parts(self) -> (Spent<K>, SmallVec<[(usize, Decision); 2]>) {
        (self.spent, self.entries)
    }

    /// Advances as far as the stores answer at once ([`poll`](Self::poll)
    /// without a context), under `shared`'s per-key lock if it has one: a
    /// check-then-refund is never seen half-done by another request of the
    /// layer (exact when the stores answer at once).
    #[inline]
    pub(crate) fn poll_locked<X, R>(&mut self, shared: &Shared<X, St, R>) -> Poll<Verdict>
    where
        X: KeyExtractor<Key = K>,
        K: Hash,
    {
        let _guard = shared.stripes.as_ref().map(|s| s.lock(&self.spent.key));
        self.poll(None, &shared.limits, shared.on_store_error)
    }

    /// Advances as far as it can. Without a context (`None`) it goes only
    /// as far as the stores answer at once, and is `Pending` at the first
    /// store future, which it creates but leaves unpolled for a later call
    /// with a context.
    pub(crate) fn poll(
        &mut self,
        mut cx: Option<&mut Context<'_>>,
        limits: &[Limit<St>],
        policy: FailurePolicy,
    ) -> Poll<Verdict> {
        loop {
            match &mut self.step {
                Step::Check(i, fut) => {
                    let i = *i;
                    let Some(cx) = cx.as_deref_mut() else {
                        return Poll::Pending;
                    };
                    let result = std::task::ready!(Pin::new(fut).poll(cx));
                    self.step = Step::Next;
                    self.checked(i, result, limits, policy);
                }
                Step::Refund(j, fut) => {
                    let j = *j;
                    let Some(cx) = cx.as_deref_mut() else {
                        return Poll::Pending;
                    };
                    let result = std::task::ready!(Pin::new(fut).poll(cx));
                    self.step = Step::Next;
                    self.refunded(j, result, limits);
                }
                Step::Next => {
                    if let Some(verdict) = self.advance(limits, policy) {
                        return Poll::Ready(verdict);
                    }
                }
            }
        }
    }

    /// One step from `Step::Next`: a refund once a limit has settled the
    /// verdict, else the next selected limit's check; the verdict when
    /// nothing is left to do.
    #[inline]
    fn advance(&mut self, limits: &[Limit<St>], policy: FailurePolicy) -> Option<Verdict> {
        if self.verdict.is_some() {
            return self.refund_next(limits);
        }
        if self.pending == 0 {
            return Some(Verdict::Admitted);
        }
        let i = self.pending.trailing_zeros() as usize;
        self.pending &= self.pending - 1;
        let store = &limits[i].store;
        let Spent { key, cost, now } = &self.spent;
        match store.check(key, *cost, *now).into_ready() {
            Ok(result) => self.checked(i, result, limits, policy),
            Err(fut) => self.step = Step::Check(i, fut),
        }
        None
    }

    /// Refunds the next entry that admitted the request (at once, or as
    /// `Step::Refund`); the verdict once every one is refunded.
    fn refund_next(&mut self, limits: &[Limit<St>]) -> Option<Verdict> {
        let Spent { key, cost, now } = &self.spent;
        let (cost, now) = (*cost, *now);
        let next =
            (self.refund_from..self.entries.len()).find(|&j| self.entries[j].1.allowed && cost > 0);
        let Some(j) = next else {
            self.refund_from = self.entries.len();
            return Some(self.verdict.take().unwrap_or(Verdict::Admitted));
        };
        let store = &limits[self.entries[j].0].store;
        match store.refund(key, cost, now, now).into_ready() {
            Ok(result) => self.refunded(j, result, limits),
            Err(fut) => self.step = Step::Refund(j, fut),
        }
        None
    }

    /// Records limit `i`'s answer.
    #[inline]
    fn checked(
        &mut self,
        i: usize,
        result: Result<Decision, StoreError>,
        limits: &[Limit<St>],
        policy: FailurePolicy,
    ) {
        let (decision, verdict) = outcome(result, limits[i].name, policy);
        if let Some(d) = decision {
            self.entries.push((i, d));
        }
        if verdict.is_some() {
            self.verdict = verdict;
        }
    }

    /// Records the refund of entry `j`.
    fn refunded(&mut self, j: usize, result: Result<(), StoreError>, limits: &[Limit<St>]) {
        if let Err(e) = result {
            observe::refund_error(limits[self.entries[j].0].name, &e);
        }
        self.refund_from = j + 1;
    }
}
