//! Choosing, per request, which of a layer's limits apply (plan tiers, anonymous vs authenticated).

use http::request::Parts;

/// A set of a layer's limits, by the order they were added (at most 64).
///
/// ```
/// use tower_ratelimit::strategy::Selection;
///
/// let tiers = Selection::only(0).with(2);
/// assert!(tiers.contains(2) && !tiers.contains(1));
/// assert_eq!(tiers.bits(), 0b101);
/// assert!(!Selection::NONE.contains(0));
/// ```
///
/// A selection naming a limit the layer does not have (an index past its
/// limits, or past 64) is a bug in the selector: the layer then checks
/// the request against every limit, never none, and logs an error once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Selection {
    bits: u64,
    /// Whether an index past 64 was named.
    stray: bool,
}

impl Selection {
    /// Every limit.
    pub const ALL: Self = Self {
        bits: u64::MAX,
        stray: false,
    };
    /// No limit: the request goes on unlimited.
    pub const NONE: Self = Self {
        bits: 0,
        stray: false,
    };

    /// Only limit `index`.
    pub const fn only(index: usize) -> Self {
        Self::NONE.with(index)
    }

    /// This set and limit `index`.
    pub const fn with(self, index: usize) -> Self {
        if index < 64 {
            Self {
                bits: self.bits | 1 << index,
                ..self
            }
        } else {
            Self {
                stray: true,
                ..self
            }
        }
    }

    /// Whether limit `index` is in the set.
    pub const fn contains(self, index: usize) -> bool {
        index < 64 && self.bits & (1 << index) != 0
    }

    /// The set as a bit mask (bit `i` for limit `i`).
    pub const fn bits(self) -> u64 {
        self.bits
    }

    /// The limits of a layer whose limits are `all` (a bit each) this
    /// selection checks; `Err` with every limit when it names one the
    /// layer does not have.
    #[inline]
    pub(crate) fn within(self, all: u64) -> Result<u64, u64> {
        match self.stray || self.bits & !all != 0 && self != Self::ALL {
            false => Ok(self.bits & all),
            true => Err(all),
        }
    }
}

/// Chooses which limits apply to a request, given its head and key.
/// Closures `Fn(&Parts, &K) -> Selection` are selectors too (given to
/// [`select`](crate::RateLimitBuilder::select), a closure names its
/// arguments' types: `|req: &Parts, key: &K|`).
///
/// ```
/// use http::request::Parts;
/// use tower_ratelimit::strategy::{LimitSelector, Selection};
///
/// #[derive(Clone, PartialEq)]
/// enum Plan { Free, Pro }
///
/// // Limit 0 is the free plan's, limit 1 the pro plan's.
/// let by_plan = |req: &Parts, _key: &String| match req.extensions.get::<Plan>() {
///     Some(Plan::Pro) => Selection::only(1),
///     _ => Selection::only(0),
/// };
/// let req = http::Request::new(()).into_parts().0;
/// assert_eq!(by_plan.select(&req, &"k".to_owned()), Selection::only(0));
/// ```
pub trait LimitSelector<K>: Send + Sync + 'static {
    /// The limits that apply to `req`.
    fn select(&self, req: &Parts, key: &K) -> Selection;
}

impl<F, K> LimitSelector<K> for F
where
    F: Fn(&Parts, &K) -> Selection + Send + Sync + 'static,
{
    #[inline]
    fn select(&self, req: &Parts, key: &K) -> Selection {
        self(req, key)
    }
}
