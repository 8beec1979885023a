//! [`RateLimit`]: the service that checks each request in `call` and answers or forwards it.

use crate::check::{poll_now, Checker, Verdict};
use crate::future::{HeaderPlan, ResponseFuture};
use crate::info::{LimitDecision, RateLimitInfo};
use crate::key::KeyExtractor;
use crate::observe;
use crate::policy::{FailurePolicy, KeyErrorPolicy, Mode};
use crate::response::{ProblemJson, Rejection, ResponseBuilder};
use crate::shared::Shared;
use http::request::Parts;
use http::{Request, Response};
use ratelimit_core::{Decision, Store};
use smallvec::SmallVec;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The rate-limiting service made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// Limits are checked in [`call`](Service::call), never in `poll_ready`
/// (which is the inner service's), and a limited request is answered with a
/// response, not an error: the error type stays the inner service's.
pub struct RateLimit<S, X: KeyExtractor, St, R = ProblemJson> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared<X, St, R>>,
}

impl<S, X: KeyExtractor, St, R> RateLimit<S, X, St, R> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, consuming the limiter.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, X: KeyExtractor, St, R> Clone for RateLimit<S, X, St, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: fmt::Debug, X: KeyExtractor, St, R> fmt::Debug for RateLimit<S, X, St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Marks a response as a rejection by a rate limit, for
/// [`refund_on_inner_limit`](crate::RateLimitBuilder::refund_on_inner_limit)
/// in an outer layer. Set on rejections of requests that an outer
/// rate-limit layer has already seen.
#[derive(Debug, Clone, Copy)]
pub struct Limited;

/// Cost reserved by an admitted request, for refunds.
struct Reserved<K> {
    key: K,
    cost: u64,
    at: u64,
    limits: SmallVec<[usize; 2]>,
}

#[allow(clippy::large_enum_variant)] // Transient, moved once.
enum Next<B, K> {
    Respond(Response<B>),
    Forward {
        plan: Option<HeaderPlan>,
        hold: Duration,
        reserved: Option<Reserved<K>>,
    },
}

impl<S, X, St, R, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, X, St, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    X: KeyExtractor,
    X::Key: Hash,
    St: Store<X::Key>,
    St::CheckFuture: Unpin,
    St::RefundFuture: Unpin,
    R: ResponseBuilder<ResBody>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let (mut parts, body) = req.into_parts();
        let key = match shared.key.extract(&parts) {
            Ok(key) => key,
            Err(e) => {
                observe::key_error(&e);
                let pass = match shared.on_key_error {
                    KeyErrorPolicy::Reject => false,
                    KeyErrorPolicy::Allow => true,
                    KeyErrorPolicy::AllowMissing => e.is_missing(),
                };
                if pass {
                    let fut = self.inner.call(Request::from_parts(parts, body));
                    return ResponseFuture::inner(fut, None);
                }
                return ResponseFuture::ready(Ok(shared.response.build(Rejection::KeyError(&e))));
            }
        };
        let mut selection = shared.all;
        if let Some(select) = &shared.select {
            selection &= select.select(&parts, &key).bits();
        }
        if selection == 0 {
            return ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), None);
        }
        let cost = shared.cost.as_ref().map_or(1, |c| c.cost(&parts));
        let now = shared.clock.now();
        let single: [(usize, Decision); 1];
        let mut checker;
        let (key, entries, verdict): (X::Key, &[(usize, Decision)], Verdict) =
            if shared.limits.len() == 1 {
                // One limit: call the store directly (no lock, no refunds).
                let limit = &shared.limits[0];
                let mut fut = limit.store.check(&key, cost, now);
                match poll_now(&mut fut) {
                    Some(Ok(d)) if d.allowed && shared.plain => {
                        // The common case: straight on.
                        observe::allowed(limit.name);
                        let entry = LimitDecision {
                            name: limit.name,
                            decision: d,
                        };
                        let plan =
                            HeaderPlan::allowed(&shared.headers, std::slice::from_ref(&entry));
                        RateLimitInfo::one(entry).merge_owned(&mut parts.extensions);
                        let req = Request::from_parts(parts, body);
                        return ResponseFuture::inner(self.inner.call(req), plan);
                    }
                    Some(Ok(d)) => {
                        single = [(0, d)];
                        let verdict = if d.allowed {
                            Verdict::Admitted
                        } else {
                            Verdict::Denied
                        };
                        (key, &single, verdict)
                    }
                    Some(Err(e)) => {
                        let open = shared.on_store_error == FailurePolicy::Open;
                        observe::store_error(limit.name, &e, open);
                        let verdict = if open {
                            Verdict::Admitted
                        } else {
                            Verdict::Unavailable(e)
                        };
                        (key, &[], verdict)
                    }
                    None => {
                        let checker = Checker::<X::Key, St>::resume(key, cost, now, 0, 0, fut);
                        return self.pending(parts, body, checker);
                    }
                }
            } else {
                checker = Checker::<X::Key, St>::new(key, cost, now, selection);
                let polled = {
                    // Several limits: check them under a per-key lock, so
                    // that a check-then-refund is never seen half-done by
                    // another request of this layer (exact when the store's
                    // futures are ready).
                    let _guard = shared.stripes.as_ref().map(|s| s.lock(&checker.key));
                    let mut cx = Context::from_waker(std::task::Waker::noop());
                    checker.poll(&mut cx, &shared.limits, shared.on_store_error)
                };
                match polled {
                    Poll::Ready(verdict) => (checker.key, &checker.entries, verdict),
                    Poll::Pending => return self.pending(parts, body, checker),
                }
            };
        match decide(shared, &mut parts, key, cost, now, entries, verdict) {
            Next::Respond(res) => ResponseFuture::ready(Ok(res)),
            Next::Forward {
                plan,
                hold,
                reserved: None,
            } if hold.is_zero() => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), plan)
            }
            Next::Forward {
                plan,
                hold,
                reserved,
            } => {
                let inner = self.take_inner();
                let req = Request::from_parts(parts, body);
                let reservation = reserved.map(|reserved| Reservation {
                    shared: self.shared.clone(),
                    reserved: Some(reserved),
                    refund_on_drop: !hold.is_zero(),
                });
                ResponseFuture::boxed(Box::pin(forward(inner, req, plan, hold, reservation)))
            }
        }
    }
}

impl<S, X, St, R> RateLimit<S, X, St, R>
where
    S: Clone,
    X: KeyExtractor,
    St: Store<X::Key>,
    St::CheckFuture: Unpin,
    St::RefundFuture: Unpin,
{
    /// A remote store: finish the check asynchronously.
    #[cold]
    #[inline(never)]
    fn pending<ReqBody, ResBody>(
        &mut self,
        mut parts: Parts,
        body: ReqBody,
        mut checker: Checker<X::Key, St>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
        X::Key: Hash,
        R: ResponseBuilder<ResBody>,
        ReqBody: Send + 'static,
        ResBody: Send + 'static,
    {
        let inner = self.take_inner();
        let shared = self.shared.clone();
        ResponseFuture::boxed(Box::pin(async move {
            let verdict =
                std::future::poll_fn(|cx| checker.poll(cx, &shared.limits, shared.on_store_error))
                    .await;
            let Checker {
                key,
                cost,
                now,
                entries,
                ..
            } = checker;
            match decide(&shared, &mut parts, key, cost, now, &entries, verdict) {
                Next::Respond(res) => Ok(res),
                Next::Forward {
                    plan,
                    hold,
                    reserved,
                } => {
                    let req = Request::from_parts(parts, body);
                    let reservation = reserved.map(|reserved| Reservation {
                        shared: shared.clone(),
                        reserved: Some(reserved),
                        refund_on_drop: !hold.is_zero(),
                    });
                    forward(inner, req, plan, hold, reservation).await
                }
            }
        }))
    }
}

impl<S: Clone, X: KeyExtractor, St, R> RateLimit<S, X, St, R> {
    /// The ready inner service, leaving a fresh clone in its place.
    fn take_inner(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn decide<X, St, R, B>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    key: X::Key,
    cost: u64,
    now: u64,
    checked: &[(usize, Decision)],
    verdict: Verdict,
) -> Next<B, X::Key>
where
    X: KeyExtractor,
    R: ResponseBuilder<B>,
{
    let entry = |&(i, decision): &(usize, Decision)| LimitDecision {
        name: shared.limits[i].name,
        decision,
    };
    let entries: SmallVec<[LimitDecision; 1]> = match checked {
        [one] => SmallVec::from_buf([entry(one)]),
        _ => checked.iter().map(entry).collect(),
    };
    let dry_run = shared.mode == Mode::DryRun;
    let mut reserved = None;
    let mut hold = Duration::ZERO;
    let info = match verdict {
        Verdict::Unavailable(e) => {
            return Next::Respond(shared.response.build(Rejection::Unavailable(&e)));
        }
        Verdict::Denied => {
            let i = entries.len() - 1;
            let info = RateLimitInfo {
                entries,
                denied: Some(i),
                dry_run,
            };
            let denied = &info.entries[i];
            observe::limited(denied.name, &denied.decision, dry_run);
            if !dry_run {
                let mut res = shared.response.build(Rejection::Limited(&info));
                if parts.extensions.get::<RateLimitInfo>().is_some() {
                    // An outer rate-limit layer ran: tell it (only then, as
                    // the marker costs an allocation).
                    res.extensions_mut().insert(Limited);
                }
                shared
                    .headers
                    .write(res.headers_mut(), &info.entries, info.denied);
                return Next::Respond(res);
            }
            info
        }
        Verdict::Admitted => {
            for e in &entries {
                observe::allowed(e.name);
            }
            if shared.mode == Mode::Shape {
                hold = entries
                    .iter()
                    .map(|e| e.decision.hold())
                    .max()
                    .unwrap_or_default();
            }
            let refundable = shared.count_if.is_some() || shared.refund_on_inner_limit;
            if (refundable || !hold.is_zero()) && cost > 0 {
                reserved = Some(Reserved {
                    limits: checked
                        .iter()
                        .filter(|(_, d)| d.allowed)
                        .map(|&(i, _)| i)
                        .collect(),
                    key,
                    cost,
                    at: now,
                });
            }
            RateLimitInfo {
                entries,
                denied: None,
                dry_run: false,
            }
        }
    };
    let plan = HeaderPlan::allowed(&shared.headers, &info.entries);
    info.merge_owned(&mut parts.extensions);
    Next::Forward {
        plan,
        hold,
        reserved,
    }
}

/// Cost reserved by an admitted request that may be given back: when the
/// response does not count, or when the request is dropped while held.
/// Created before the forwarding future, so dropping that future even
/// before its first poll gives a held request's slots back.
struct Reservation<X: KeyExtractor, St: Store<X::Key>, R> {
    shared: Arc<Shared<X, St, R>>,
    reserved: Option<Reserved<X::Key>>,
    /// Whether dropping it refunds (while a shaped request is held).
    refund_on_drop: bool,
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Reservation<X, St, R> {
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
            let limit = &shared.limits[i];
            if let Err(e) = limit.store.refund(&r.key, r.cost, r.at, now).await {
                observe::refund_error(limit.name, &e);
            }
        }
        plan.as_ref()?; // No fields to correct.
        let mut entries = SmallVec::<[LimitDecision; 2]>::new();
        for &i in &r.limits {
            let limit = &shared.limits[i];
            match limit.store.check(&r.key, 0, now).await {
                Ok(decision) => entries.push(LimitDecision {
                    name: limit.name,
                    decision,
                }),
                Err(_) => return plan,
            }
        }
        HeaderPlan::allowed(&shared.headers, &entries)
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Drop for Reservation<X, St, R> {
    fn drop(&mut self) {
        if !self.refund_on_drop {
            return;
        }
        // Completes at once with `MemoryStore`; a remote store's refund is
        // polled once and otherwise abandoned (the slot stays used).
        if let Some(r) = self.reserved.take() {
            let now = self.shared.clock.now();
            for &i in &r.limits {
                let limit = &self.shared.limits[i];
                let mut fut = Box::pin(limit.store.refund(&r.key, r.cost, r.at, now));
                if let Some(Err(e)) = poll_now(&mut fut) {
                    observe::refund_error(limit.name, &e);
                }
            }
        }
    }
}

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
{
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    if let Some(r) = &mut reservation {
        r.refund_on_drop = false;
    }
    let mut result = inner.call(req).await;
    if let Some(r) = reservation {
        let counts = match result {
            Ok(res) => {
                let (head, body) = res.into_parts();
                let limited_inside =
                    r.shared.refund_on_inner_limit && head.extensions.get::<Limited>().is_some();
                let counts =
                    !limited_inside && r.shared.count_if.as_ref().is_none_or(|p| p.counts(&head));
                result = Ok(Response::from_parts(head, body));
                counts
            }
            Err(e) => {
                result = Err(e);
                r.shared.count_if.is_none()
            }
        };
        if !counts {
            plan = r.refund(plan).await;
        }
    }
    if let (Ok(res), Some(plan)) = (&mut result, plan) {
        plan.apply(res);
    }
    result
}
