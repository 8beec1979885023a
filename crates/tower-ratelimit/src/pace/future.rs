//! [`PaceFuture`]: the inner service's response with its body paced, or a key error's rejection.

use super::body::PacedBody;
use super::meter::Meter;
use http::Response;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// The future of a [`PaceService`](super::PaceService): the inner
    /// service's response, its body a [`PacedBody`].
    ///
    /// ```
    /// use axum::body::Body;
    /// use http::{Request, Response};
    /// use http_body_util::BodyExt;
    /// use std::{convert::Infallible, time::Duration};
    /// use tower::{Layer, ServiceExt};
    /// use tower::Service;
    /// use tower_ratelimit::pace::PaceFuture;
    /// use tower_ratelimit::pace::PaceLayer;
    /// use tower_ratelimit::{key::Global, MemoryStore, TokenBucket};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let bytes = TokenBucket::new(1024, 1024, Duration::from_secs(1)).unwrap();
    /// let pace = PaceLayer::builder("download", MemoryStore::new(bytes), Global, 256)
    ///     .build()
    ///     .unwrap();
    /// let inner = tower::service_fn(|_: Request<_>| async {
    ///     Ok::<_, Infallible>(Response::new(Body::from(vec![0u8; 100])))
    /// });
    /// let mut svc = pace.layer(inner);
    /// let fut: PaceFuture<_, Body> = svc.ready().await.unwrap().call(Request::new(Body::empty()));
    /// assert_eq!(fut.await.unwrap().status(), 200);
    /// # }
    /// ```
    pub struct PaceFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B> {
        Inner { #[pin] fut: F, meter: Option<Meter> },
        Ready { res: Option<Response<B>> },
    }
}

impl<F, B> PaceFuture<F, B> {
    /// The inner service's future; its body paced with `meter`, if any.
    pub(crate) fn inner(fut: F, meter: Option<Meter>) -> Self {
        Self {
            kind: Kind::Inner { fut, meter },
        }
    }

    /// An answer of the layer's own (a key error's rejection).
    pub(crate) fn ready(res: Response<B>) -> Self {
        Self {
            kind: Kind::Ready { res: Some(res) },
        }
    }
}

impl<F, B, E> Future for PaceFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<PacedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { fut, meter } => {
                let res = ready!(fut.poll(cx))?;
                let res = match meter.take() {
                    Some(meter) => res.map(|b| PacedBody::paced(b, meter)),
                    None => res.map(PacedBody::unpaced),
                };
                Poll::Ready(Ok(res))
            }
            KindProj::Ready { res } => match res.take() {
                Some(res) => Poll::Ready(Ok(res.map(PacedBody::unpaced))),
                // Polled after completion.
                None => Poll::Pending,
            },
        }
    }
}

impl<F, B> fmt::Debug for PaceFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceFuture").finish_non_exhaustive()
    }
}
