//! Forwarding an admitted request: holding a shaped one, and giving its
//! cost back (a reservation) when the response does not count or the
//! request is dropped while held.

use crate::cost_report::CostReport;
use crate::future::HeaderPlan;
use crate::info::Limited;
use crate::key::KeyExtractor;
use crate::observe;
pub(crate) use crate::reserved::Reserved;
use crate::settle::Settlement;
use crate::shared::Shared;
use http::{Request, Response};
use ratelimit_core::Store;
use smallvec::SmallVec;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tower_service::Service;

/// Cost reserved by an admitted request that may be given back: when the
/// response does not count, or when the request is dropped while held.
/// Created before the forwarding future, so dropping that future even
/// before its first poll gives a held request's slots back.
pub(crate) struct Reservation<X: KeyExtractor, St: Store<X::Key>, R> {
    shared: Arc<Shared<X, St, R>>,
    reserved: Option<Reserved<X::Key>>,
    /// Whether dropping it refunds (while a shaped request is held).
    refund_on_drop: bool,
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Reservation<X, St, R> {
    pub(crate) fn new(
        shared: Arc<Shared<X, St, R>>,
        reserved: Reserved<X::Key>,
        held: bool,
    ) -> Self {
        Self {
            shared,
            reserved: Some(reserved),
            refund_on_drop: held,
        }
    }

    /// Gives the reserved cost back. With a `plan` (fields for the
    /// response), reads each limit's state afterwards (a cost-0 check, a
    /// peek) so that the fields show the refund; if a read fails, the
    /// plan stays as it was.
    async fn refund(mut self, plan: Option<HeaderPlan>) -> Option<HeaderPlan> {
        let Some(r) = self.reserved.take() else {
            return plan;
        };
        let shared = &*self.shared;
        let now = shared.clock.now();
        for &i in &r.limits {
            let store = &shared.limits[i].store;
            let result = store.refund(&r.key, r.cost, r.at, now).await;
            if let Err(e) = result {
                observe::refund_error(shared.limits[i].name, &e);
            }
        }
        Self::reread(shared, &r, now, plan).await
    }

    /// Resets the key on every limit that admitted the request (its
    /// response matched `reset_if`), then reads the fields afresh as
    /// [`refund`](Self::refund) does.
    async fn reset(mut self, plan: Option<HeaderPlan>) -> Option<HeaderPlan> {
        let Some(r) = self.reserved.take() else {
            return plan;
        };
        let shared = &*self.shared;
        for &i in &r.limits {
            let store = &shared.limits[i].store;
            let result = store.reset(&r.key).await;
            match result {
                Ok(()) => observe::reset(shared.limits[i].name),
                Err(e) => observe::reset_error(shared.limits[i].name, &e),
            }
        }
        let now = shared.clock.now();
        Self::reread(shared, &r, now, plan).await
    }

    /// The fields of `plan` read again after a refund or a reset (a peek
    /// of each limit); `plan` as it was if a read fails.
    async fn reread(
        shared: &Shared<X, St, R>,
        r: &Reserved<X::Key>,
        now: u64,
        plan: Option<HeaderPlan>,
    ) -> Option<HeaderPlan> {
        plan.as_ref()?; // No fields to correct.
        let mut entries = SmallVec::<[(usize, _); 2]>::new();
        for &i in &r.limits {
            let store = &shared.limits[i].store;
            let peek = store.check(&r.key, 0, now).await;
            match peek {
                Ok(decision) => entries.push((i, decision)),
                Err(_) => return plan,
            }
        }
        HeaderPlan::allowed(&shared.fields, &entries)
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Drop for Reservation<X, St, R> {
    fn drop(&mut self) {
        if !self.refund_on_drop {
            return;
        }
        let Some(r) = self.reserved.take() else {
            return;
        };
        let now = self.shared.clock.now();
        for &i in &r.limits {
            let limit = &self.shared.limits[i];
            match limit.store.refund(&r.key, r.cost, r.at, now).into_ready() {
                Ok(Err(e)) => observe::refund_error(limit.name, &e),
                Ok(Ok(())) => {}
                // A remote store: refund in the background, if there is a
                // runtime to do it on (otherwise the slot stays used).
                Err(fut) => {
                    let name = limit.name;
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        rt.spawn(async move {
                            if let Err(e) = fut.await {
                                observe::refund_error(name, &e);
                            }
                        });
                    }
                }
            }
        }
    }
}

/// What forwarding an admitted request takes: the fields for its response,
/// how long to hold it (shape mode), and what it reserved.
pub(crate) struct Forward<K> {
    pub(crate) plan: Option<HeaderPlan>,
    pub(crate) hold: Duration,
    pub(crate) reserved: Option<Reserved<K>>,
}

impl<K> Forward<K> {
    /// Nothing to hold or give back: the inner service's future is the
    /// response future, with the fields of [`plan`](Self::plan).
    #[inline]
    pub(crate) fn is_direct(&self) -> bool {
        self.reserved.is_none() && self.hold.is_zero()
    }

    /// Forwards `req` to `inner` (see [`forward`]). The reservation is made
    /// at once, so dropping the future even before its first poll gives a
    /// held request's cost back.
    pub(crate) fn call<S, X, St, R, ReqBody, ResBody>(
        self,
        inner: S,
        shared: &Arc<Shared<X, St, R>>,
        req: Request<ReqBody>,
    ) -> impl Future<Output = Result<Response<ResBody>, S::Error>>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        X: KeyExtractor<Key = K>,
        St: Store<K>,
        R: Send + Sync + 'static,
    {
        let held = !self.hold.is_zero();
        let reservation = self
            .reserved
            .map(|r| Reservation::new(shared.clone(), r, held));
        forward(inner, req, self.plan, self.hold, reservation)
    }
}

/// Holds a shaped request for `hold`, calls the inner service, and gives
/// the reserved cost back if the response does not count; then adds the
/// fields of `plan`.
async fn forward<S, X, St, R, ReqBody, ResBody>(
    mut inner: S,
    req: Request<ReqBody>,
    mut plan: Option<HeaderPlan>,
    hold: Duration,
    mut reservation: Option<Reservation<X, St, R>>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    X: KeyExtractor,
    St: Store<X::Key>,
    R: Send + Sync + 'static,
{
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    if let Some(r) = &mut reservation {
        r.refund_on_drop = false;
    }
    let mut req = req;
    let settlement = lend(&mut reservation, &mut req);
    let mut result = inner.call(req).await;
    if let Some(r) = reservation {
        let (counts, resets) = match result {
            Ok(res) => {
                let (head, body) = res.into_parts();
                let limited_inside =
                    r.shared.refund_on_inner_limit && head.extensions.get::<Limited>().is_some();
                let counts =
                    !limited_inside && r.shared.count_if.as_ref().is_none_or(|p| p.counts(&head));
                let resets = r.shared.reset_if.as_ref().is_some_and(|p| p.counts(&head));
                if let Some(s) = &settlement {
                    s.read_head(&head, counts);
                }
                result = Ok(Response::from_parts(head, body));
                (counts, resets)
            }
            Err(e) => {
                result = Err(e);
                (r.shared.count_if.is_none(), false)
            }
        };
        if let Some(s) = settlement {
            Settlement::finish(s).await;
        }
        if resets {
            plan = r.reset(plan).await;
        } else if !counts {
            plan = r.refund(plan).await;
        }
    }
    if let (Ok(res), Some(plan)) = (&mut result, plan) {
        plan.apply(res);
    }
    result
}

/// Takes the reservation out to be settled, if the layer settles costs,
/// and lends the request a [`CostReport`] (feeding also an outer layer's).
fn lend<X, St, R, B>(
    reservation: &mut Option<Reservation<X, St, R>>,
    req: &mut Request<B>,
) -> Option<Arc<Settlement<X, St, R>>>
where
    X: KeyExtractor,
    St: Store<X::Key>,
    R: Send + Sync + 'static,
{
    let r = reservation.as_mut()?;
    r.shared.settle.as_ref()?;
    let settlement = Settlement::start(&r.shared, r.reserved.take());
    let outer = req.extensions_mut().remove::<CostReport>();
    req.extensions_mut().insert(settlement.report(outer));
    Some(settlement)
}
