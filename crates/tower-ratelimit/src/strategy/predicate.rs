//! Response predicates: which responses count against the limit (failed logins...).

use http::response::Parts;
use http::StatusCode;

/// Decides whether a response counts against the limit.
///
/// ```
/// use tower_ratelimit::strategy::ResponsePredicate;
///
/// // Only responses the handler marks as costly count.
/// let marked = |res: &http::response::Parts| res.headers.contains_key("x-costly");
/// let res = http::Response::builder().header("x-costly", "1").body(()).unwrap();
/// assert!(marked.counts(&res.into_parts().0));
/// ```
///
/// With [`count_if`](crate::RateLimitBuilder::count_if) the layer reserves the
/// cost before calling the service (so concurrent requests cannot slip
/// past) and refunds it when the response does not count. Closures
/// `Fn(&http::response::Parts) -> bool` are predicates too (a closure
/// names its argument's type: `|res: &http::response::Parts|`).
pub trait ResponsePredicate: Send + Sync + 'static {
    /// Whether `response` counts.
    fn counts(&self, response: &Parts) -> bool;
}

impl<F> ResponsePredicate for F
where
    F: Fn(&Parts) -> bool + Send + Sync + 'static,
{
    #[inline]
    fn counts(&self, response: &Parts) -> bool {
        self(response)
    }
}

/// Counts responses with one status (`401` for failed logins).
///
/// ```
/// use http::StatusCode;
/// use tower_ratelimit::strategy::{ResponsePredicate, StatusIs};
///
/// let res = |status: u16| http::Response::builder().status(status).body(()).unwrap().into_parts().0;
/// let failed_logins = StatusIs::new(StatusCode::UNAUTHORIZED);
/// assert!(failed_logins.counts(&res(401)) && !failed_logins.counts(&res(200)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusIs(pub StatusCode);

impl StatusIs {
    /// Counts responses with `status`.
    pub const fn new(status: StatusCode) -> Self {
        Self(status)
    }
}

impl ResponsePredicate for StatusIs {
    fn counts(&self, response: &Parts) -> bool {
        response.status == self.0
    }
}

/// Counts client errors (4xx).
///
/// ```
/// use tower_ratelimit::strategy::{ClientErrors, ResponsePredicate};
///
/// let res = |status: u16| http::Response::builder().status(status).body(()).unwrap().into_parts().0;
/// assert!(ClientErrors.counts(&res(404)) && !ClientErrors.counts(&res(500)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientErrors;

impl ResponsePredicate for ClientErrors {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_client_error()
    }
}

/// Counts server errors (5xx).
///
/// ```
/// use tower_ratelimit::strategy::{ResponsePredicate, ServerErrors};
///
/// let res = |status: u16| http::Response::builder().status(status).body(()).unwrap().into_parts().0;
/// assert!(ServerErrors.counts(&res(503)) && !ServerErrors.counts(&res(429)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerErrors;

impl ResponsePredicate for ServerErrors {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_server_error()
    }
}

/// Counts successful responses (2xx): limit what was actually done.
///
/// ```
/// use tower_ratelimit::strategy::{ResponsePredicate, Successes};
///
/// let res = |status: u16| http::Response::builder().status(status).body(()).unwrap().into_parts().0;
/// assert!(Successes.counts(&res(201)) && !Successes.counts(&res(400)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Successes;

impl ResponsePredicate for Successes {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_success()
    }
}
