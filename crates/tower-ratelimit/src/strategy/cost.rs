//! The cost of a request: how many units of the limit it uses.

use crate::LayerBuildError;
use http::request::Parts;

/// How many units of the limit a request uses (1 by default). A cost of 0
/// is a peek: always admitted, consumes nothing. Closures
/// `Fn(&Parts) -> u64` are costs too (given to
/// [`cost`](crate::RateLimitBuilder::cost), a closure names its argument's
/// type: `|req: &Parts|`).
///
/// ```
/// use http::request::Parts;
/// use tower_ratelimit::strategy::Cost;
///
/// // Bulk endpoints cost one unit per item in `?count=`.
/// let per_item = |req: &Parts| {
///     req.uri
///         .query()
///         .and_then(|q| q.strip_prefix("count="))
///         .and_then(|n| n.parse().ok())
///         .unwrap_or(1u64)
/// };
/// let req = http::Request::get("/bulk?count=20").body(()).unwrap();
/// assert_eq!(per_item.cost(&req.into_parts().0), 20);
/// ```
pub trait Cost: Send + Sync + 'static {
    /// The cost of `req`.
    fn cost(&self, req: &Parts) -> u64;
}

impl<F> Cost for F
where
    F: Fn(&Parts) -> u64 + Send + Sync + 'static,
{
    #[inline]
    fn cost(&self, req: &Parts) -> u64 {
        self(req)
    }
}

/// The same cost for every request.
///
/// ```
/// use tower_ratelimit::strategy::{Cost, FixedCost};
///
/// let req = http::Request::post("/export").body(()).unwrap();
/// assert_eq!(FixedCost::new(10).unwrap().cost(&req.into_parts().0), 10);
/// assert!(FixedCost::new(0).is_err()); // a peek is said: FixedCost::PEEK
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedCost(u64);

impl FixedCost {
    /// A peek: every request costs 0, is admitted, consumes nothing and
    /// sees the quota left.
    pub const PEEK: Self = Self(0);

    /// Every request costs `n`; fails on 0, which would admit every
    /// request for free (a peek is [`PEEK`](Self::PEEK)).
    pub const fn new(n: u64) -> Result<Self, LayerBuildError> {
        match n {
            0 => Err(LayerBuildError::ZeroCost),
            n => Ok(Self(n)),
        }
    }

    /// The cost of every request.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl Cost for FixedCost {
    #[inline]
    fn cost(&self, _req: &Parts) -> u64 {
        self.0
    }
}

/// A boxed cost is a cost (a cost chosen at run time, as a policy file's).
impl Cost for Box<dyn Cost> {
    #[inline]
    fn cost(&self, req: &Parts) -> u64 {
        (**self).cost(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed cost of 0 is refused: a peek is said with `PEEK`.
    #[test]
    fn a_fixed_cost_of_zero_is_refused() {
        assert!(matches!(FixedCost::new(0), Err(LayerBuildError::ZeroCost)));
        let req = http::Request::new(()).into_parts().0;
        assert_eq!(FixedCost::PEEK.cost(&req), 0);
        assert_eq!(FixedCost::new(3).unwrap().cost(&req), 3);
    }
}
