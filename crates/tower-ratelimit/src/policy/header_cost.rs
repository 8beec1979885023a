//! [`HeaderCost`]: a cost (or a settled limit's estimate) read from a request header.

use super::cost::Cost;
use http::request::Parts;
use http::HeaderName;

/// The decimal in request header `name` as the cost; a request without it,
/// or with a value that is not a decimal, costs `fallback`. As the estimate
/// of a settled limit ([`settle`](crate::RateLimitBuilder::settle)) it is
/// what the client says it may use at most (`x-max-tokens`), reserved at
/// admission and settled to the actual cost afterwards.
///
/// ```
/// use tower_ratelimit::policy::{Cost, HeaderCost};
///
/// let cost = HeaderCost::new(http::HeaderName::from_static("x-max-tokens"), 1);
/// let req = http::Request::post("/v1/chat").header("x-max-tokens", "500").body(()).unwrap();
/// assert_eq!(cost.cost(&req.into_parts().0), 500);
/// let req = http::Request::post("/v1/chat").body(()).unwrap();
/// assert_eq!(cost.cost(&req.into_parts().0), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderCost {
    name: HeaderName,
    fallback: u64,
}

impl HeaderCost {
    /// The decimal in `name`, or `fallback`.
    pub fn new(name: HeaderName, fallback: u64) -> Self {
        Self { name, fallback }
    }
}

impl Cost for HeaderCost {
    fn cost(&self, req: &Parts) -> u64 {
        req.headers
            .get(&self.name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(self.fallback)
    }
}
