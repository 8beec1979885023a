//! [`HeaderCost`]: a cost (or a settled limit's estimate) read from a request header.

use super::cost::Cost;
use crate::decimal::decimal;
use crate::LayerBuildError;
use http::request::Parts;
use http::HeaderName;

/// The positive decimal in request header `name` as the cost. A request
/// without it, or with a value that is not a positive decimal (`0`, `00`,
/// `+0`, `-5`, `abc`, empty), costs `fallback`, which is at least 1: no
/// header value makes a request a peek. A number past `u64` is read as
/// `u64::MAX` (more than any capacity: refused). With
/// [`at_most`](Self::at_most), a value above `max` costs `max`.
///
/// As the estimate of a settled limit
/// ([`settle`](crate::RateLimitBuilder::settle)) it is what the client
/// says it may use at most (`x-max-tokens`), reserved at admission and
/// settled to the actual cost afterwards. Give it the most one call may
/// use as both the fallback and the cap, and have the handler deliver at
/// most [`CostReport::reserved`](crate::CostReport::reserved): then no
/// settlement goes past its reservation, and a key is held to its limit
/// however many calls overlap.
///
/// ```
/// use tower_ratelimit::strategy::{Cost, HeaderCost};
///
/// // At most 4000 tokens a call; 4000 reserved without a usable header.
/// let name = http::HeaderName::from_static("x-max-tokens");
/// let cost = HeaderCost::new(name, 4000)?.at_most(4000)?;
/// let with = |v: &str| http::Request::post("/v1/chat").header("x-max-tokens", v).body(()).unwrap();
/// assert_eq!(cost.cost(&with("500").into_parts().0), 500);
/// assert_eq!(cost.cost(&with("90000").into_parts().0), 4000);
/// assert_eq!(cost.cost(&with("0").into_parts().0), 4000);
/// let without = http::Request::post("/v1/chat").body(()).unwrap();
/// assert_eq!(cost.cost(&without.into_parts().0), 4000);
/// # Ok::<(), tower_ratelimit::LayerBuildError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderCost {
    name: HeaderName,
    fallback: u64,
    max: u64,
}

impl HeaderCost {
    /// The positive decimal in `name`, or `fallback`. A `fallback` of 0
    /// is refused: every request without the header would be a peek.
    pub fn new(name: HeaderName, fallback: u64) -> Result<Self, LayerBuildError> {
        if fallback == 0 {
            return Err(LayerBuildError::BadHeaderCost(format!(
                "{name}: a fallback of 0 makes a request without the header a peek \
                 (admitted even past the limit); the fallback is at least 1"
            )));
        }
        Ok(Self {
            name,
            fallback,
            max: u64::MAX,
        })
    }

    /// Caps the header's value at `max`. A `max` below the fallback is
    /// refused: a request would pay more without the header than with it.
    pub fn at_most(mut self, max: u64) -> Result<Self, LayerBuildError> {
        if max < self.fallback {
            return Err(LayerBuildError::BadHeaderCost(format!(
                "{}: the cap {max} is below the fallback {}",
                self.name, self.fallback
            )));
        }
        self.max = max;
        Ok(self)
    }
}

impl Cost for HeaderCost {
    fn cost(&self, req: &Parts) -> u64 {
        match req.headers.get(&self.name).and_then(decimal) {
            Some(n) if n > 0 => n.min(self.max),
            _ => self.fallback,
        }
    }
}
