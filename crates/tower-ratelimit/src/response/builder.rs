//! The [`ResponseBuilder`] trait: what a rejected request gets back.

use crate::key::KeyError;
use crate::RateLimitInfo;
use http::Response;
use ratelimit_core::StoreError;

/// Why the layer answers instead of the inner service.
///
/// ```
/// use bytes::Bytes;
/// use tower_ratelimit::key::KeyError;
/// use tower_ratelimit::response::{ProblemJson, Rejection, ResponseBuilder};
///
/// let missing = KeyError::missing("x-api-key");
/// let res: http::Response<Bytes> = ProblemJson::new().build(Rejection::KeyError(&missing));
/// assert_eq!(res.status(), 400);
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// A limit denied the request ([`RateLimitInfo::denied`] says which).
    Limited(&'a RateLimitInfo),
    /// No key, and the [`KeyErrorPolicy`](crate::strategy::KeyErrorPolicy)
    /// rejects: answer with [`KeyError::status`] (a 4xx).
    KeyError(&'a KeyError),
    /// The store failed and the
    /// [`FailurePolicy`](crate::strategy::FailurePolicy) is `Closed`: answer
    /// 503.
    Unavailable(&'a StoreError),
}

/// Builds the response for a [`Rejection`], in the inner service's body
/// type `B`. Closures `Fn(Rejection<'_>) -> Response<B>` are builders too
/// (given to [`response`](crate::RateLimitBuilder::response), a closure
/// names its argument's type: `|r: Rejection<'_>|`).
///
/// The layer then adds the rate-limit headers (`Retry-After`,
/// `RateLimit-Policy`, `RateLimit`, legacy ones if enabled) to limited
/// responses, unless the builder set them already.
///
/// ```
/// use http::{Response, StatusCode};
/// use tower_ratelimit::response::{ProblemJson, Rejection, ResponseBuilder};
///
/// // Plain text for 429s, the default for everything else.
/// let custom = |r: Rejection<'_>| -> Response<String> {
///     match r {
///         Rejection::Limited(_) => Response::builder()
///             .status(StatusCode::TOO_MANY_REQUESTS)
///             .body("slow down".to_owned())
///             .unwrap(),
///         other => ProblemJson::new().build(other).map(|b: bytes::Bytes| {
///             String::from_utf8_lossy(&b).into_owned()
///         }),
///     }
/// };
/// # let _ = custom;
/// ```
pub trait ResponseBuilder<B>: Send + Sync + 'static {
    /// The response to `rejection`.
    fn build(&self, rejection: Rejection<'_>) -> Response<B>;
}

impl<F, B> ResponseBuilder<B> for F
where
    F: Fn(Rejection<'_>) -> Response<B> + Send + Sync + 'static,
{
    fn build(&self, rejection: Rejection<'_>) -> Response<B> {
        self(rejection)
    }
}
