//! A `[[limit]]`'s `estimate` and `cost-from`: a cost reserved at admission and settled after the response, and their checks.

use crate::strategy::{Cost, FixedCost, HeaderCost};
use crate::{CostFrom, LayerBuildError};
use http::HeaderName;
use serde::{Deserialize, Deserializer};
use std::str::FromStr;

/// What a settled limit reserves at admission: `estimate = 1000` (at
/// least 1), or `estimate = "header:x-max-tokens"` with `max-cost = N`:
/// the request header's positive decimal, capped at `N`; a request
/// without it, or with a value that is not a positive decimal (`0`, `00`,
/// `+0`, `-5`, `abc`, empty), reserves `N`. A number past `u64` is capped
/// too.
///
/// ```
/// use tower_ratelimit::policy::{Estimate, PolicyTable};
///
/// let table = PolicyTable::from_toml(r#"
/// [[limit]]
/// name = "tokens"
/// algorithm = "fixed-window 100000/1d"
/// key = "api-key"
/// estimate = "header:x-max-tokens"
/// max-cost = 40000
/// cost-from = "response-header:x-tokens-used"
/// "#, None).unwrap();
/// let tokens = table.entry("tokens").unwrap();
/// assert_eq!(tokens.estimate, Some(Estimate::Header("x-max-tokens".parse().unwrap())));
/// assert_eq!(tokens.max_cost, Some(40000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Estimate {
    /// The same for every request.
    Fixed(u64),
    /// The positive decimal in this request header, at most `max-cost`
    /// (`max-cost` without it).
    Header(HeaderName),
}

impl Estimate {
    /// Why `estimate` and `max_cost` cannot work on an algorithm of
    /// `capacity`, if they cannot: a fixed estimate of 0 (every call a
    /// peek, admitted even in debt) or above the capacity (every call
    /// refused), a header estimate without `max-cost` (a call without
    /// the header would reserve next to nothing, however much it uses),
    /// a `max-cost` of 0 or above the capacity, or a `max-cost` without
    /// a header estimate (it would do nothing).
    pub(super) fn checked(
        estimate: Option<&Self>,
        max_cost: Option<u64>,
        capacity: u64,
    ) -> Result<(), String> {
        match (estimate, max_cost) {
            (Some(Self::Fixed(0)), _) => Err(
                "estimate = 0 makes every call a peek, admitted even for a key in debt; \
                 the estimate is at least 1"
                    .to_owned(),
            ),
            (Some(Self::Fixed(n)), _) if *n > capacity => Err(format!(
                "estimate = {n} is above the capacity {capacity} of the algorithm: every request would be refused"
            )),
            (Some(Self::Fixed(n)), Some(max)) => Err(format!(
                "max-cost = {max} applies to estimate = \"header:NAME\" only: \
                 estimate = {n} is the reservation itself"
            )),
            (Some(Self::Header(name)), None) => Err(format!(
                "estimate = \"header:{name}\" needs max-cost = N, the most one call may use \
                 (reserved when the header is missing or not a positive decimal)"
            )),
            (Some(Self::Header(_)), Some(0)) => {
                Err("max-cost = 0: the most one call may use is at least 1".to_owned())
            }
            (Some(Self::Header(_)), Some(max)) if max > capacity => Err(format!(
                "max-cost = {max} is above the capacity {capacity} of the algorithm: \
                 a call without the header would always be refused"
            )),
            (None, Some(_)) => Err("max-cost needs estimate = \"header:NAME\"".to_owned()),
            _ => Ok(()),
        }
    }

    /// The cost the layer reserves (`max_cost` checked at load).
    pub(super) fn cost(&self, max_cost: Option<u64>) -> Result<Box<dyn Cost>, LayerBuildError> {
        match self {
            Self::Fixed(n) => Ok(Box::new(FixedCost::new(*n)?)),
            Self::Header(name) => {
                let max = max_cost.ok_or_else(|| {
                    LayerBuildError::BadHeaderCost(format!(
                        "{name}: estimate = \"header:{name}\" needs max-cost"
                    ))
                })?;
                Ok(Box::new(HeaderCost::new(name.clone(), max)?.at_most(max)?))
            }
        }
    }
}

pub(super) fn estimate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Estimate>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Fixed(u64),
        Text(String),
    }
    let text = match Raw::deserialize(d)? {
        Raw::Fixed(n) => return Ok(Some(Estimate::Fixed(n))),
        Raw::Text(text) => text,
    };
    text.strip_prefix("header:")
        .and_then(|name| HeaderName::from_str(name).ok())
        .map(|name| Some(Estimate::Header(name)))
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "bad estimate {text:?}: expected a number or \"header:NAME\""
            ))
        })
}

pub(super) fn cost_from<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CostFrom>, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}
