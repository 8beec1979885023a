//! [`RateLimit`]: the service that checks each request in `call` and answers or forwards it (forwarding and reservations: `reserve.rs`).

use crate::check::{outcome, Checker, Spent, Verdict};
use crate::future::{HeaderPlan, ResponseFuture};
use crate::info::{Body, LimitDecision, Limited, RateLimitInfo};
use crate::key::{KeyError, KeyExtractor};
use crate::observe;
use crate::policy::{KeyErrorPolicy, Mode};
use crate::reserve::{forward, Reservation, Reserved};
use crate::response::{ProblemJson, Rejection, ResponseBuilder};
use crate::shared::Shared;
use http::request::Parts;
use http::{Request, Response};
use ratelimit_core::{Decision, Store, StoreError};
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
            Err(e) => return self.key_error(parts, body, &e),
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
        if let [limit] = &*shared.limits {
            // One limit: no lock, no refunds.
            let answer = limit.store.check_now(&key, cost, now);
            if let Some(Ok(d)) = &answer {
                if d.allowed && shared.plain {
                    // The common case: straight on.
                    straight_on(shared, &mut parts, *d);
                    let fut = self.inner.call(Request::from_parts(parts, body));
                    // The fields rendered after the call: no copies of them
                    // live across it.
                    let plan = HeaderPlan::one(&shared.fields, 0, d);
                    return ResponseFuture::inner(fut, plan);
                }
            }
            return self.one_limit(parts, body, Spent { key, cost, now }, answer);
        }
        let mut checker = Checker::new(key, cost, now, selection);
        let polled = {
            // Several limits: check them under a per-key lock, so that a
            // check-then-refund is never seen half-done by another request
            // of this layer (exact when the stores answer at once).
            let _guard = shared.stripes.as_ref().map(|s| s.lock(checker.key()));
            checker.poll(None, &shared.limits, shared.on_store_error)
        };
        match polled {
            Poll::Ready(verdict) => {
                let (spent, checked) = checker.into_parts();
                self.finish(parts, body, spent, &checked, verdict)
            }
            Poll::Pending => self.pending(parts, body, checker),
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
    /// No key: reject, or pass as the policy says.
    #[cold]
    fn key_error<ReqBody, ResBody>(
        &mut self,
        parts: Parts,
        body: ReqBody,
        e: &KeyError,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        R: ResponseBuilder<ResBody>,
    {
        let shared = &*self.shared;
        observe::no_peer_once(e, shared.limits[0].name, &shared.no_peer_logged);
        observe::key_error(e);
        let pass = !e.is_denied()
            && match self.shared.on_key_error {
                KeyErrorPolicy::Reject => false,
                KeyErrorPolicy::Allow => true,
                KeyErrorPolicy::AllowMissing => e.is_missing(),
            };
        if pass {
            return ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), None);
        }
        ResponseFuture::ready(Ok(self.shared.response.build(Rejection::KeyError(e))))
    }

    /// One limit, whose store gave `answer` to `check_now`, and the request
    /// does not go straight on.
    #[inline]
    fn one_limit<ReqBody, ResBody>(
        &mut self,
        parts: Parts,
        body: ReqBody,
        spent: Spent<X::Key>,
        answer: Option<Result<Decision, StoreError>>,
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
        let limit = &self.shared.limits[0];
        let (decision, verdict) = match answer {
            Some(result) => outcome(result, limit.name, self.shared.on_store_error),
            None => {
                let fut = limit.store.check(&spent.key, spent.cost, spent.now);
                return self.pending(parts, body, Checker::resume(spent, fut));
            }
        };
        let single;
        let checked: &[(usize, Decision)] = match decision {
            Some(d) => {
                single = [(0, d)];
                &single
            }
            None => &[],
        };
        self.finish(
            parts,
            body,
            spent,
            checked,
            verdict.unwrap_or(Verdict::Admitted),
        )
    }

    /// Every limit answered at once: respond, or forward. Always inlined:
    /// the request head is not copied into its frame (`ours-limited` in
    /// `benches/http/instructions.sh`: 38 fewer instructions per request).
    #[inline(always)]
    fn finish<ReqBody, ResBody>(
        &mut self,
        mut parts: Parts,
        body: ReqBody,
        spent: Spent<X::Key>,
        checked: &[(usize, Decision)],
        verdict: Verdict,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
        R: ResponseBuilder<ResBody>,
        ReqBody: Send + 'static,
        ResBody: Send + 'static,
    {
        match decide(&self.shared, &mut parts, spent, checked, verdict) {
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
                let reservation =
                    reserved.map(|r| Reservation::new(self.shared.clone(), r, !hold.is_zero()));
                ResponseFuture::boxed(Box::pin(forward(inner, req, plan, hold, reservation)))
            }
        }
    }

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
            let verdict = std::future::poll_fn(|cx| {
                checker.poll(Some(cx), &shared.limits, shared.on_store_error)
            })
            .await;
            let (spent, checked) = checker.into_parts();
            match decide(&shared, &mut parts, spent, &checked, verdict) {
                Next::Respond(res) => Ok(res),
                Next::Forward {
                    plan,
                    hold,
                    reserved,
                } => {
                    let req = Request::from_parts(parts, body);
                    let reservation =
                        reserved.map(|r| Reservation::new(shared.clone(), r, !hold.is_zero()));
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

/// One limit admitted a request with nothing to hold or give back: its
/// decision for the handler.
#[inline]
fn straight_on<X: KeyExtractor, St, R>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    decision: Decision,
) {
    let name = shared.limits[0].name;
    observe::allowed(name);
    RateLimitInfo::one(LimitDecision { name, decision }).merge_owned(&mut parts.extensions);
}

/// What to do with a checked request: the response to a rejection, or
/// what forwarding it takes (fields, hold, reservation).
#[inline]
fn decide<X, St, R, B>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    spent: Spent<X::Key>,
    checked: &[(usize, Decision)],
    verdict: Verdict,
) -> Next<B, X::Key>
where
    X: KeyExtractor,
    R: ResponseBuilder<B>,
{
    let Spent { key, cost, now } = spent;
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
                body: Body(Some(shared.limits[checked[i].0].body)),
            };
            let denied = &info.entries[i];
            observe::limited(denied.name, &denied.decision, dry_run);
            if !dry_run {
                shared.limits[checked[i].0].summary.refused(now);
            }
            if !dry_run {
                let mut res = shared.response.build(Rejection::Limited(&info));
                if parts.extensions.get::<RateLimitInfo>().is_some() {
                    // An outer rate-limit layer ran: tell it (only then, as
                    // the marker costs an allocation).
                    res.extensions_mut().insert(Limited);
                }
                shared.fields.write(res.headers_mut(), checked, info.denied);
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
            let refundable = shared.count_if.is_some()
                || shared.reset_if.is_some()
                || shared.refund_on_inner_limit;
            let settles = shared.settle.is_some();
            if (refundable || settles || !hold.is_zero()) && (cost > 0 || settles) {
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
                body: Body::default(),
            }
        }
    };
    let plan = HeaderPlan::allowed(&shared.fields, checked);
    info.merge_owned(&mut parts.extensions);
    Next::Forward {
        plan,
        hold,
        reserved,
    }
}
