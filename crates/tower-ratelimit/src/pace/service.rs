//! [`PaceService`]: keys each request and wraps its bodies in [`PacedBody`](super::PacedBody)s charging that key's budget.

use super::body::PacedBody;
use super::budget::{Budget, KeyBudget};
use super::future::PaceFuture;
use super::meter::Meter;
use super::shared::PaceShared;
use crate::key::{KeyError, KeyExtractor};
use crate::observe;
use crate::response::{ProblemJson, Rejection, ResponseBuilder};
use http::{Request, Response};
use ratelimit_core::Store;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The service made by [`PaceLayer`](super::PaceLayer): the inner service
/// sees a request whose body is a [`PacedBody`], and its response's body
/// is wrapped in one (each paced or not, as the layer's
/// [`Paced`](super::Paced) says). Nothing is refused but a request
/// without a usable key, as the key-error policy says.
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use http_body_util::BodyExt;
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
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
/// let svc = pace.layer(inner);
/// let res = svc.oneshot(Request::new(Body::from("upload"))).await.unwrap();
/// assert_eq!(res.into_body().collect().await.unwrap().to_bytes().len(), 100);
/// # }
/// ```
pub struct PaceService<S, X: KeyExtractor, St, R = ProblemJson> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<PaceShared<X, St, R>>,
}

impl<S: Clone, X: KeyExtractor, St, R> Clone for PaceService<S, X, St, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: fmt::Debug, X: KeyExtractor, St, R> fmt::Debug for PaceService<S, X, St, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, X, St, R, ReqBody, ResBody> Service<Request<ReqBody>> for PaceService<S, X, St, R>
where
    S: Service<Request<PacedBody<ReqBody>>, Response = Response<ResBody>>,
    X: KeyExtractor,
    St: Store<X::Key>,
    R: ResponseBuilder<ResBody>,
{
    type Response = Response<PacedBody<ResBody>>;
    type Error = S::Error;
    type Future = PaceFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let (parts, body) = req.into_parts();
        let key = match shared.key.extract(&parts) {
            Ok(key) => key,
            Err(e) => {
                if !self.passes(&e) {
                    return PaceFuture::ready(shared.response.build(Rejection::KeyError(&e)));
                }
                let req = Request::from_parts(parts, PacedBody::unpaced(body));
                return PaceFuture::inner(self.inner.call(req), None);
            }
        };
        if shared.skip.is_some_and(|skip| skip(&key)) {
            let req = Request::from_parts(parts, PacedBody::unpaced(body));
            return PaceFuture::inner(self.inner.call(req), None);
        }
        let budget: Arc<dyn Budget> = Arc::new(KeyBudget {
            key,
            store: shared.store.clone(),
        });
        let meter = || {
            let clock = shared.clock.clone();
            Meter::new(
                budget.clone(),
                clock,
                shared.name,
                shared.piece,
                shared.after,
            )
        };
        let body = match shared.paced.requests() {
            true => PacedBody::paced(body, meter()),
            false => PacedBody::unpaced(body),
        };
        let response_meter = shared.paced.responses().then(meter);
        let fut = self.inner.call(Request::from_parts(parts, body));
        PaceFuture::inner(fut, response_meter)
    }
}

impl<S, X: KeyExtractor, St, R> PaceService<S, X, St, R> {
    /// Whether a request whose key is `e` goes through (unpaced): logged
    /// and counted as every layer's key errors are.
    #[cold]
    fn passes(&self, e: &KeyError) -> bool {
        let shared = &*self.shared;
        observe::no_peer_once(e, shared.name, &shared.no_peer_logged);
        observe::key_error(e);
        shared.on_key_error.passes(e)
    }
}
