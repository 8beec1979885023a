//! [`FairQueue`]: the service, its waiting tickets and its permits.

use super::queue::{Admit, Full, WaitState};
use super::Shared;
use crate::info::{LimitDecision, RateLimitInfo};
use crate::key::KeyExtractor;
use crate::observe;
use crate::response::{Rejection, ResponseBuilder};
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Request, Response};
use ratelimit_core::{Decision, StoreError};
use std::fmt;
use std::future::{poll_fn, Future};
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tower_service::Service;

/// The fair-queuing service made by [`FairQueueLayer`](super::FairQueueLayer).
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::convert::Infallible;
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{fair::FairQueueLayer, key::Global};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let inner = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// let queue = FairQueueLayer::builder(Global).build().unwrap().layer(inner);
/// assert_eq!((queue.in_flight(), queue.queued()), (0, 0));
/// assert_eq!(queue.clone().oneshot(Request::new(())).await.unwrap().status(), 200);
/// # }
/// ```
///
/// Requests are admitted or queued in [`call`](Service::call); `poll_ready`
/// is always ready (the inner service's readiness is awaited by each
/// request once admitted). A request that is not served is answered with a
/// response, never an error.
pub struct FairQueue<S, X: KeyExtractor, R> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared<X, R>>,
}

impl<S: Clone, X: KeyExtractor, R> Clone for FairQueue<S, X, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: fmt::Debug, X: KeyExtractor, R> fmt::Debug for FairQueue<S, X, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairQueue")
            .field("inner", &self.inner)
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl<S, X: KeyExtractor, R> FairQueue<S, X, R>
where
    X::Key: Hash + Eq + Clone,
{
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// How many requests run in the inner service now.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_flight
    }

    /// How many requests wait now.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued
    }

    /// How many keys have waiting requests now (at most the total queue
    /// length).
    pub fn queued_keys(&self) -> usize {
        self.shared.lock().keys()
    }
}

/// The future of a [`FairQueue`]: boxed, as it awaits a place, then the
/// inner service.
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::convert::Infallible;
/// use tower::{Layer, Service, ServiceExt};
/// use tower_ratelimit::fair::{FairFuture, FairQueueLayer};
/// use tower_ratelimit::key::Global;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let inner = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// let mut queue = FairQueueLayer::builder(Global).build().unwrap().layer(inner);
/// let fut: FairFuture<Response<Body>, Infallible> = queue.ready().await.unwrap().call(Request::new(()));
/// assert_eq!(fut.await.unwrap().status(), 200);
/// # }
/// ```
pub type FairFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, X, R, ReqBody, ResBody> Service<Request<ReqBody>> for FairQueue<S, X, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    X: KeyExtractor,
    X::Key: Hash + Eq + Clone,
    R: ResponseBuilder<ResBody>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = FairFuture<Response<ResBody>, S::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = self.shared.clone();
        let (parts, body) = req.into_parts();
        let key = match shared.key.extract(&parts) {
            Ok(key) => key,
            Err(e) => {
                observe::no_peer_once(&e, shared.name, &shared.no_peer_logged);
                tracing::debug!(queue = shared.name, error = %e, "no fair-queue key");
                let res = shared.response.build(Rejection::KeyError(&e));
                return Box::pin(std::future::ready(Ok(res)));
            }
        };
        let cost = shared.cost.as_ref().map_or(1, |c| c.cost(&parts));
        let req = Request::from_parts(parts, body);
        let limit = shared.capacity.limit();
        let (admit, in_flight, queued) = {
            let mut st = shared.lock();
            let admit = st.admit(key, cost, limit);
            (admit, st.in_flight, st.queued)
        };
        let svc = self.inner.clone();
        match admit {
            Admit::Now => {
                let permit = Permit::new(shared, in_flight);
                Box::pin(run(svc, req, permit))
            }
            Admit::Queued(w) => {
                let deadline = Instant::now() + shared.max_wait;
                // Made here, not in the async block: a future dropped before
                // its first poll leaves the queue too.
                let ticket = Ticket {
                    queue: shared.clone(),
                    waiter: w,
                    done: false,
                };
                Box::pin(async move {
                    match tokio::time::timeout_at(deadline, ticket).await {
                        Ok(permit) => run(svc, req, permit).await,
                        Err(_) => {
                            let queued = shared.lock().queued;
                            Ok(reject(&shared, Refusal::Timeout, queued))
                        }
                    }
                })
            }
            Admit::Rejected(full) => {
                let why = match full {
                    Full::Key => Refusal::KeyFull,
                    Full::Total => Refusal::QueueFull,
                };
                Box::pin(std::future::ready(Ok(reject(&shared, why, queued))))
            }
        }
    }
}

async fn run<S, Req, Res>(mut svc: S, req: Req, permit: Permit) -> Result<Res, S::Error>
where
    S: Service<Req, Response = Res>,
{
    poll_fn(|cx| svc.poll_ready(cx)).await?;
    let res = svc.call(req).await;
    permit.complete();
    res
}

/// Why a request was not served.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    KeyFull,
    QueueFull,
    Timeout,
}

/// The answer to a request that was not served: 429 when its own queue is
/// full, 503 when the whole queue is or it waited too long; both with
/// `Retry-After`.
fn reject<X: KeyExtractor, R: ResponseBuilder<B>, B>(
    shared: &Shared<X, R>,
    why: Refusal,
    queued: usize,
) -> Response<B> {
    // Time to drain the queue at the measured service time, at least 1 s.
    let service = Duration::from_nanos(shared.service_nanos());
    let limit = shared.capacity.limit().max(1);
    let drain = service.saturating_mul(u32::try_from(queued / limit + 1).unwrap_or(u32::MAX));
    let wait = drain.clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let reason = match why {
        Refusal::KeyFull => "key_full",
        Refusal::QueueFull => "queue_full",
        Refusal::Timeout => "timeout",
    };
    tracing::debug!(queue = shared.name, reason, retry_after = ?wait, "fair queue refused a request");
    #[cfg(feature = "metrics")]
    metrics::counter!(crate::observe::names::FAIR_QUEUE_REJECTED, "queue" => shared.name, "reason" => reason)
        .increment(1);
    let mut res = match why {
        Refusal::KeyFull => {
            let decision = Decision::denied(shared.max_per_key as u64, wait, wait, wait);
            let info = RateLimitInfo {
                entries: smallvec::smallvec![LimitDecision {
                    name: shared.name,
                    decision,
                }],
                denied: Some(0),
                dry_run: false,
            };
            shared.response.build(Rejection::Limited(&info))
        }
        Refusal::QueueFull | Refusal::Timeout => {
            let what = if matches!(why, Refusal::Timeout) {
                "waited past its deadline in"
            } else {
                "found no place in"
            };
            let e = StoreError::unavailable(
                "fair_queue",
                format!("request {what} fair queue {:?}", shared.name),
            );
            shared.response.build(Rejection::Unavailable(&e))
        }
    };
    if !res.headers().contains_key(RETRY_AFTER) {
        let secs = ratelimit_core::plumbing::ceil_secs(wait);
        res.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    res
}

/// A place in the inner service: released (and the next waiter served)
/// when dropped.
struct Permit {
    release: Option<Release>,
}

/// What a permit needs to release its place.
struct Release {
    queue: Arc<dyn QueueOps>,
    started: Instant,
    in_flight: usize,
}

/// The shared state's operations, without its type parameters.
pub(super) trait QueueOps: Send + Sync + 'static {
    /// A place is free; `sample` is the latency of the request that held
    /// it (started, latency, in flight then), if it completed.
    fn release(&self, sample: Option<(Instant, Duration, usize)>);
    /// Waiter `w` is granted (it leaves the queue, keeping its place, and
    /// gets the number in flight), or registers `cx`'s waker.
    fn poll_grant(&self, w: usize, cx: &mut Context<'_>) -> Poll<usize>;
    /// Waiter `w` gives up: it leaves the queue, or releases its place if it
    /// was granted meanwhile.
    fn cancel(&self, w: usize);
}

impl Permit {
    fn new(queue: Arc<dyn QueueOps>, in_flight: usize) -> Self {
        Self {
            release: Some(Release {
                queue,
                started: Instant::now(),
                in_flight,
            }),
        }
    }

    /// The request completed: its latency is a sample.
    fn complete(mut self) {
        if let Some(r) = self.release.take() {
            let latency = r.started.elapsed();
            r.queue.release(Some((r.started, latency, r.in_flight)));
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r.queue.release(None);
        }
    }
}

/// A queued request's claim: resolves to a [`Permit`] when granted; leaves
/// the queue at once when dropped.
struct Ticket {
    queue: Arc<dyn QueueOps>,
    waiter: usize,
    done: bool,
}

impl Future for Ticket {
    type Output = Permit;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit> {
        let this = &mut *self;
        match this.queue.poll_grant(this.waiter, cx) {
            Poll::Ready(in_flight) => {
                this.done = true;
                Poll::Ready(Permit::new(this.queue.clone(), in_flight))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.queue.cancel(self.waiter);
        }
    }
}

impl<X: KeyExtractor, R: Send + Sync + 'static> QueueOps for Shared<X, R>
where
    X::Key: Hash + Eq + Clone,
{
    fn release(&self, sample: Option<(Instant, Duration, usize)>) {
        if let Some((started, latency, in_flight)) = sample {
            self.record(latency);
            self.capacity.sample(started, latency, in_flight);
        }
        let limit = self.capacity.limit();
        let mut wake = Vec::new();
        {
            let mut st = self.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
            st.dispatch(limit, &mut wake);
        }
        wake.into_iter().for_each(std::task::Waker::wake);
    }

    fn poll_grant(&self, w: usize, cx: &mut Context<'_>) -> Poll<usize> {
        let mut st = self.lock();
        let granted = match st.waiter_mut(w).map(|x| &mut x.state) {
            Some(WaitState::Granted) => true,
            Some(WaitState::Waiting(waker)) => {
                match waker {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                false
            }
            // Unreachable: the slot is the ticket's until it leaves.
            None => return Poll::Pending,
        };
        if granted {
            st.leave(w);
            Poll::Ready(st.in_flight)
        } else {
            Poll::Pending
        }
    }

    fn cancel(&self, w: usize) {
        let limit = self.capacity.limit();
        let mut wake = Vec::new();
        {
            let mut st = self.lock();
            if st.leave(w) {
                st.in_flight = st.in_flight.saturating_sub(1);
                st.dispatch(limit, &mut wake);
            }
        }
        wake.into_iter().for_each(std::task::Waker::wake);
    }
}
