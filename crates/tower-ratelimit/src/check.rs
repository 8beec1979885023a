//! Checking a request against its limits: all of them admit, or none consumes.

use crate::observe;
use crate::policy::FailurePolicy;
use crate::shared::Limit;
use ratelimit_core::{Decision, Store, StoreError};
use smallvec::SmallVec;
use std::future::Future;
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

enum Step<C, F> {
    Next,
    Check(usize, C),
    Refund(usize, F),
}

/// Checks the selected limits one after the other; when one denies (or
/// fails closed), refunds those already admitted. A state machine that
/// completes in one poll when the store's futures are ready.
pub(crate) struct Checker<K, St: Store<K>> {
    pub(crate) key: K,
    pub(crate) cost: u64,
    pub(crate) now: u64,
    pending: u64,
    step: Step<St::CheckFuture, St::RefundFuture>,
    /// `(limit index, decision)`, in check order.
    pub(crate) entries: SmallVec<[(usize, Decision); 2]>,
    verdict: Option<Verdict>,
    refund_from: usize,
}

impl<K, St> Checker<K, St>
where
    St: Store<K>,
    St::CheckFuture: Unpin,
    St::RefundFuture: Unpin,
{
    pub(crate) fn new(key: K, cost: u64, now: u64, selection: u64) -> Self {
        Self {
            key,
            cost,
            now,
            pending: selection,
            step: Step::Next,
            entries: SmallVec::new(),
            verdict: None,
            refund_from: 0,
        }
    }

    /// A checker whose check of limit `i` is under way (`fut`), with the
    /// limits of `pending` (a bit mask) still to check.
    pub(crate) fn resume(
        key: K,
        cost: u64,
        now: u64,
        pending: u64,
        i: usize,
        fut: St::CheckFuture,
    ) -> Self {
        Self {
            key,
            cost,
            now,
            pending,
            step: Step::Check(i, fut),
            entries: SmallVec::new(),
            verdict: None,
            refund_from: 0,
        }
    }

    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        limits: &[Limit<St>],
        policy: FailurePolicy,
    ) -> Poll<Verdict> {
        loop {
            match &mut self.step {
                Step::Check(i, fut) => {
                    let i = *i;
                    let result = match Pin::new(fut).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r,
                    };
                    self.step = Step::Next;
                    match result {
                        Ok(d) => {
                            self.entries.push((i, d));
                            if !d.allowed {
                                self.verdict = Some(Verdict::Denied);
                            }
                        }
                        Err(e) => {
                            let open = policy == FailurePolicy::Open;
                            observe::store_error(limits[i].name, &e, open);
                            if !open {
                                self.verdict = Some(Verdict::Unavailable(e));
                            }
                        }
                    }
                }
                Step::Refund(j, fut) => {
                    let j = *j;
                    let result = match Pin::new(fut).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r,
                    };
                    if let Err(e) = result {
                        observe::refund_error(limits[self.entries[j].0].name, &e);
                    }
                    self.refund_from = j + 1;
                    self.step = Step::Next;
                }
                Step::Next => {
                    if self.verdict.is_some() {
                        let next = (self.refund_from..self.entries.len())
                            .find(|&j| self.entries[j].1.allowed && self.cost > 0);
                        if let Some(j) = next {
                            let store = &limits[self.entries[j].0].store;
                            let fut = store.refund(&self.key, self.cost, self.now, self.now);
                            self.step = Step::Refund(j, fut);
                            continue;
                        }
                        self.refund_from = self.entries.len();
                        return Poll::Ready(self.verdict.take().unwrap_or(Verdict::Admitted));
                    }
                    if self.pending == 0 {
                        return Poll::Ready(Verdict::Admitted);
                    }
                    let i = self.pending.trailing_zeros() as usize;
                    self.pending &= self.pending - 1;
                    let fut = limits[i].store.check(&self.key, self.cost, self.now);
                    self.step = Step::Check(i, fut);
                }
            }
        }
    }
}

/// Polls a future once without a real waker: the result of a store whose
/// futures are ready (`MemoryStore`), or `None`.
pub(crate) fn poll_now<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
    match Pin::new(fut).poll(&mut Context::from_waker(std::task::Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}
