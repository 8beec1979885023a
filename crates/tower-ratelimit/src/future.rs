//! [`ResponseFuture`]: the inner service's future, a ready rejection, or the slow path.

use crate::response::{Fields, Rendered};
use http::Response;
use pin_project_lite::pin_project;
use ratelimit_core::Decision;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The fields to add to an admitted response.
pub(crate) struct HeaderPlan(pub(crate) Rendered);

impl HeaderPlan {
    /// The fields for an admitted request's `entries` (limit index,
    /// decision), if `fields` sends them on admitted responses.
    pub(crate) fn allowed(fields: &Fields, entries: &[(usize, Decision)]) -> Option<Self> {
        fields
            .wants_allowed()
            .then(|| HeaderPlan(fields.render(entries)))
    }

    /// [`allowed`](Self::allowed) for the decision `d` of limit `i` alone.
    pub(crate) fn one(fields: &Fields, i: usize, d: &Decision) -> Option<Self> {
        fields
            .wants_allowed()
            .then(|| HeaderPlan(fields.render_one(i, d)))
    }

    pub(crate) fn apply<B>(self, res: &mut Response<B>) {
        self.0.apply(res.headers_mut());
    }
}

pin_project! {
    /// The future of [`RateLimit`](crate::RateLimit): the inner service's
    /// future (admitted with an in-memory store: no allocation), an
    /// immediate rejection, or, for remote stores, shaping and counted
    /// responses, a boxed future.
    ///
    /// ```
    /// use axum::body::Body;
    /// use http::{Request, Response};
    /// use std::{convert::Infallible, time::Duration};
    /// use tower::{Layer, Service, ServiceExt};
    /// use tower_ratelimit::{key::Global, Gcra, MemoryStore, RateLimitLayer, ResponseFuture};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(60)).unwrap());
    /// let inner = tower::service_fn(|_: Request<Body>| async {
    ///     Ok::<_, Infallible>(Response::new(Body::empty()))
    /// });
    /// let mut svc = RateLimitLayer::new(store, Global).layer(inner);
    /// let fut: ResponseFuture<_> = svc.ready().await.unwrap().call(Request::new(Body::empty()));
    /// assert_eq!(fut.await.unwrap().status(), 200);
    /// let second = svc.ready().await.unwrap().call(Request::new(Body::empty()));
    /// assert_eq!(second.await.unwrap().status(), 429);
    /// # }
    /// ```
    pub struct ResponseFuture<F: Future> {
        #[pin]
        kind: Kind<F>,
        plan: Option<HeaderPlan>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F: Future> {
        Ready { out: Option<F::Output> },
        Inner { #[pin] fut: F },
        Boxed { fut: BoxFuture<F::Output> },
    }
}

impl<F: Future> ResponseFuture<F> {
    pub(crate) fn ready(out: F::Output) -> Self {
        Self {
            kind: Kind::Ready { out: Some(out) },
            plan: None,
        }
    }

    #[inline(always)]
    pub(crate) fn inner(fut: F, plan: Option<HeaderPlan>) -> Self {
        Self {
            kind: Kind::Inner { fut },
            plan,
        }
    }

    pub(crate) fn boxed(fut: BoxFuture<F::Output>) -> Self {
        Self {
            kind: Kind::Boxed { fut },
            plan: None,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    // Inlined into the caller's poll: the response is not moved through
    // one more frame.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Ready { out } => match out.take() {
                Some(out) => Poll::Ready(out),
                None => Poll::Pending,
            },
            KindProj::Inner { fut } => {
                // Returned as it came: the response is not moved out and
                // back in.
                let mut poll = fut.poll(cx);
                if let Poll::Ready(Ok(res)) = &mut poll {
                    if let Some(plan) = this.plan.take() {
                        plan.apply(res);
                    }
                }
                poll
            }
            KindProj::Boxed { fut } => fut.as_mut().poll(cx),
        }
    }
}

impl<F: Future> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
