//! Response predicates: which responses count against the limit (failed logins...).

use http::response::Parts;
use http::StatusCode;

/// Decides whether a response counts against the limit. With
/// [`count_if`](crate::RateLimitBuilder::count_if) the layer reserves the
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientErrors;

impl ResponsePredicate for ClientErrors {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_client_error()
    }
}

/// Counts server errors (5xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerErrors;

impl ResponsePredicate for ServerErrors {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_server_error()
    }
}

/// Counts successful responses (2xx): limit what was actually done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Successes;

impl ResponsePredicate for Successes {
    fn counts(&self, response: &Parts) -> bool {
        response.status.is_success()
    }
}
