//! [`RateLimit`]: the service whose `call` runs each request forward: check (`check.rs`), decide (`decide.rs`), then render a refusal (`render.rs`) or forward (`reserve.rs`).

use crate::check::{outcome, Checker, Spent, Verdict};
use crate::decide::{decide, Next};
use crate::future::{HeaderPlan, ResponseFuture};
use crate::info::{LimitDecision, RateLimitInfo};
use crate::key::{KeyError, KeyExtractor};
use crate::observe;
use crate::render::render;
use crate::reserve::Forward;
use crate::response::{ProblemJson, Rejection, ResponseBuilder};
use crate::shared::Shared;
use http::request::Parts;
use http::{Request, Response};
use ratelimit_core::{Decision, Store, StoreError};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The rate-limiting service made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{key::Global, Gcra, MemoryStore, RateLimit, RateLimitLayer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryStore::new(Gcra::new(2, Duration::from_secs(60)).unwrap());
/// let app = tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// let svc: RateLimit<_, _, _> = RateLimitLayer::new(store, Global).layer(app);
/// let mut statuses = Vec::new();
/// for _ in 0..3 {
///     statuses.push(svc.clone().oneshot(Request::new(Body::empty())).await.unwrap().status());
/// }
/// assert_eq!(statuses, [200, 200, 429]);
/// # }
/// ```
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

/// What the inner service of a [`RateLimit`] is: a service of HTTP
/// requests, cloned for the requests it forwards later (held, checked by a
/// remote store, or reserved), whose futures move across threads.
pub(crate) trait InnerService<ReqBody>:
    Service<
        Request<ReqBody>,
        Response = Response<<Self as InnerService<ReqBody>>::ResBody>,
        Future: Send + 'static,
        Error: Send + 'static,
    > + Clone
    + Send
    + 'static
{
    /// The body of its responses.
    type ResBody: Send + 'static;
}

impl<S, ReqBody, ResBody> InnerService<ReqBody> for S
where
    S: Service<
            Request<ReqBody>,
            Response = Response<ResBody>,
            Future: Send + 'static,
            Error: Send + 'static,
        > + Clone
        + Send
        + 'static,
    ResBody: Send + 'static,
{
    type ResBody = ResBody;
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
    St::WriteFuture: Unpin,
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
        let selection = shared.selection(&parts, &key);
        if selection == 0 {
            return self.pass(parts, body, None);
        }
        let (cost, now) = (shared.cost_of(&parts), shared.clock.now());
        // The request head is borrowed until it is forwarded: moved once.
        let checked = if let [limit] = &*shared.limits {
            // One limit: no lock, no refunds.
            match limit.store.check(&key, cost, now).into_ready() {
                Ok(Ok(d)) if d.allowed && shared.plain => {
                    // The common case: straight on.
                    let plan = self.straight_on(&mut parts, d);
                    let fut = self.inner.call(Request::from_parts(parts, body));
                    return ResponseFuture::inner(fut, plan);
                }
                Ok(result) => self.one_limit(&mut parts, Spent { key, cost, now }, result),
                Err(fut) => {
                    let checker = Checker::resume(Spent { key, cost, now }, fut);
                    return self.pending(parts, body, checker);
                }
            }
        } else {
            let mut checker = Checker::new(Spent { key, cost, now }, selection);
            match checker.poll_locked(shared) {
                Poll::Ready(verdict) => {
                    let (spent, checked) = checker.into_parts();
                    self.finish(&mut parts, spent, &checked, verdict)
                }
                Poll::Pending => return self.pending(parts, body, checker),
            }
        };
        match checked {
            Checked::Refused(res) => ResponseFuture::ready(Ok(res)),
            Checked::Forward(forward) => self.forward(parts, body, forward),
        }
    }
}

/// A request checked at once: its refusal, rendered, or its forwarding.
enum Checked<K, B> {
    Refused(Response<B>),
    Forward(Forward<K>),
}

impl<S, X, St, R> RateLimit<S, X, St, R>
where
    S: Clone,
    X: KeyExtractor,
    St: Store<X::Key, CheckFuture: Unpin, WriteFuture: Unpin>,
{
    /// Calls the inner service with the request, unchecked or admitted;
    /// the response gets the fields of `plan`.
    #[inline(always)]
    fn pass<ReqBody>(
        &mut self,
        parts: Parts,
        body: ReqBody,
        plan: Option<HeaderPlan>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>>,
    {
        ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), plan)
    }

    /// One limit admitted a request with nothing to hold or give back:
    /// its decision for the handler, and the fields for its response.
    #[inline(always)]
    fn straight_on(&self, parts: &mut Parts, decision: Decision) -> Option<HeaderPlan> {
        let shared = &*self.shared;
        let name = shared.limits[0].name;
        observe::allowed(name);
        RateLimitInfo::one(LimitDecision { name, decision }).merge_owned(&mut parts.extensions);
        HeaderPlan::one(&shared.fields, 0, &decision)
    }

    /// No key: reject, or pass as the policy says.
    #[cold]
    fn key_error<ReqBody>(
        &mut self,
        parts: Parts,
        body: ReqBody,
        e: &KeyError,
    ) -> ResponseFuture<S::Future>
    where
        S: InnerService<ReqBody>,
        R: ResponseBuilder<S::ResBody>,
    {
        let shared = &*self.shared;
        observe::no_peer_once(e, shared.limits[0].name, &shared.no_peer_logged);
        observe::key_error(e);
        if self.shared.on_key_error.passes(e) {
            return self.pass(parts, body, None);
        }
        ResponseFuture::ready(Ok(self.shared.response.build(Rejection::KeyError(e))))
    }

    /// One limit, whose store answered at once with `result`, and the
    /// request does not go straight on.
    #[inline]
    fn one_limit<B>(
        &self,
        parts: &mut Parts,
        spent: Spent<X::Key>,
        result: Result<Decision, StoreError>,
    ) -> Checked<X::Key, B>
    where
        R: ResponseBuilder<B>,
    {
        let limit = &self.shared.limits[0];
        let (decision, verdict) = outcome(result, limit.name, self.shared.on_store_error);
        let single;
        let checked: &[(usize, Decision)] = match decision {
            Some(d) => {
                single = [(0, d)];
                &single
            }
            None => &[],
        };
        let verdict = verdict.unwrap_or(Verdict::Admitted);
        self.finish(parts, spent, checked, verdict)
    }

    /// Every limit answered at once: the refusal, rendered, or the
    /// forwarding.
    #[inline(always)]
    fn finish<B>(
        &self,
        parts: &mut Parts,
        spent: Spent<X::Key>,
        checked: &[(usize, Decision)],
        verdict: Verdict,
    ) -> Checked<X::Key, B>
    where
        R: ResponseBuilder<B>,
    {
        match decide(&self.shared, parts, spent, checked, verdict) {
            Next::Refuse(refusal) => {
                Checked::Refused(render(&self.shared, parts, checked, &refusal))
            }
            Next::Forward(forward) => Checked::Forward(forward),
        }
    }

    /// Forwards an admitted (or dry-run) request: straight to the inner
    /// service, or through the slow path that holds or reserves.
    fn forward<ReqBody>(
        &mut self,
        parts: Parts,
        body: ReqBody,
        forward: Forward<X::Key>,
    ) -> ResponseFuture<S::Future>
    where
        S: InnerService<ReqBody>,
        R: ResponseBuilder<S::ResBody>,
        ReqBody: Send + 'static,
    {
        if forward.is_direct() {
            return self.pass(parts, body, forward.plan);
        }
        let req = Request::from_parts(parts, body);
        let fut = forward.call(self.take_inner(), &self.shared, req);
        ResponseFuture::boxed(Box::pin(fut))
    }

    /// A remote store: finish the check asynchronously.
    #[cold]
    #[inline(never)]
    fn pending<ReqBody>(
        &mut self,
        mut parts: Parts,
        body: ReqBody,
        mut checker: Checker<X::Key, St>,
    ) -> ResponseFuture<S::Future>
    where
        S: InnerService<ReqBody>,
        R: ResponseBuilder<S::ResBody>,
        ReqBody: Send + 'static,
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
                Next::Refuse(refusal) => Ok(render(&shared, &parts, &checked, &refusal)),
                Next::Forward(forward) => {
                    let req = Request::from_parts(parts, body);
                    forward.call(inner, &shared, req).await
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
