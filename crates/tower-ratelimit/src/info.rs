//! The decisions a request got, as handlers see them in the request extensions.

use ratelimit_core::Decision;
use smallvec::SmallVec;
use std::time::Duration;

/// One limit's decision for a request.
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{key::Global, Gcra, MemoryStore, RateLimitInfo, RateLimitLayer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryStore::new(Gcra::new(5, Duration::from_secs(60)).unwrap());
/// let layer = RateLimitLayer::builder(Global).limit("api", store).build().unwrap();
/// let inner = tower::service_fn(|req: Request<Body>| async move {
///     let info = req.extensions().get::<RateLimitInfo>().unwrap();
///     let first = info.decisions()[0];
///     assert_eq!((first.name, first.decision.remaining), ("api", 4));
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// layer.layer(inner).oneshot(Request::new(Body::empty())).await.unwrap();
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitDecision {
    /// The limit's name, as in the `RateLimit-Policy` header.
    pub name: &'static str,
    /// What it decided.
    pub decision: Decision,
}

/// Every decision a request got, inserted into the request extensions
/// before the inner service is called (read it with axum's
/// `Extension<RateLimitInfo>`), and passed to the
/// [`ResponseBuilder`](crate::response::ResponseBuilder) on rejection.
/// Stacked layers add their decisions to the same value.
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{key::Global, Gcra, MemoryStore, RateLimitInfo, RateLimitLayer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryStore::new(Gcra::new(5, Duration::from_secs(60)).unwrap());
/// let layer = RateLimitLayer::builder(Global).limit("api", store).build().unwrap();
/// let inner = tower::service_fn(|req: Request<Body>| async move {
///     let info = req.extensions().get::<RateLimitInfo>().unwrap();
///     assert!(info.is_allowed() && info.denied().is_none());
///     assert_eq!(info.get("api").unwrap().remaining, 4);
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// layer.layer(inner).oneshot(Request::new(Body::empty())).await.unwrap();
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitInfo {
    pub(crate) entries: SmallVec<[LimitDecision; 1]>,
    pub(crate) denied: Option<usize>,
    pub(crate) dry_run: bool,
}

impl RateLimitInfo {
    /// Every decision, in the order the limits were checked.
    pub fn decisions(&self) -> &[LimitDecision] {
        &self.entries
    }

    /// The decision of the limit named `name`.
    pub fn get(&self, name: &str) -> Option<&Decision> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| &e.decision)
    }

    /// The decision that denied the request, if one did.
    pub fn denied(&self) -> Option<&LimitDecision> {
        self.denied.and_then(|i| self.entries.get(i))
    }

    /// Whether every limit admitted the request.
    pub fn is_allowed(&self) -> bool {
        self.denied.is_none()
    }

    /// Whether a denied request was let through because the layer is in
    /// dry-run mode.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run && self.denied.is_some()
    }

    /// The smallest `remaining` over all limits.
    pub fn remaining(&self) -> Option<u64> {
        self.entries.iter().map(|e| e.decision.remaining).min()
    }

    /// How long a denied client should wait; `None` if admitted or if the
    /// request can never be admitted.
    pub fn retry_after(&self) -> Option<Duration> {
        self.denied().and_then(|d| d.decision.retry_after())
    }

    /// One admitted decision.
    #[inline]
    pub(crate) fn one(entry: LimitDecision) -> Self {
        Self {
            entries: SmallVec::from_buf([entry]),
            denied: None,
            dry_run: false,
        }
    }

    #[inline]
    pub(crate) fn merge_owned(self, ext: &mut http::Extensions) {
        // Usually the only layer: one map operation.
        if let Some(mut outer) = ext.insert(self) {
            if let Some(ours) = ext.get_mut::<RateLimitInfo>() {
                std::mem::swap(ours, &mut outer);
                outer.merge_into(ext);
            }
        }
    }

    pub(crate) fn merge_into(&self, ext: &mut http::Extensions) {
        match ext.get_mut::<RateLimitInfo>() {
            Some(existing) => {
                let offset = existing.entries.len();
                existing.entries.extend_from_slice(&self.entries);
                if existing.denied.is_none() && self.denied.is_some() {
                    existing.denied = self.denied.map(|i| i + offset);
                }
                existing.dry_run |= self.dry_run;
            }
            None => {
                ext.insert(self.clone());
            }
        }
    }
}

/// Marks a response as a rejection by a rate limit, for
/// [`refund_on_inner_limit`](crate::RateLimitBuilder::refund_on_inner_limit)
/// in an outer layer. Set on rejections of requests that an outer
/// rate-limit layer has already seen.
///
/// ```
/// use axum::body::Body;
/// use http::{Request, Response};
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
/// use tower_ratelimit::{key::Global, Gcra, Limited, MemoryStore, RateLimitLayer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let gcra = |n| MemoryStore::new(Gcra::new(n, Duration::from_secs(60)).unwrap());
/// let outer = RateLimitLayer::builder(Global).limit("outer", gcra(10)).build().unwrap();
/// let inner = RateLimitLayer::builder(Global).limit("inner", gcra(1)).build().unwrap();
/// let app = tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, Infallible>(Response::new(Body::empty()))
/// });
/// let svc = outer.layer(inner.layer(app));
/// svc.clone().oneshot(Request::new(Body::empty())).await.unwrap();
/// let res = svc.oneshot(Request::new(Body::empty())).await.unwrap();
/// assert_eq!(res.status(), 429);
/// assert!(res.extensions().get::<Limited>().is_some());
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Limited;
