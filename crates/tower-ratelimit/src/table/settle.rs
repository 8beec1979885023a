//! A `[[limit]]`'s `estimate` and `cost-from`: a cost reserved at admission and settled after the response, and their checks.

use crate::policy::{Cost, FixedCost, HeaderCost};
use crate::CostFrom;
use http::HeaderName;
use serde::{Deserialize, Deserializer};
use std::str::FromStr;

/// What a settled limit reserves at admission: `estimate = 1000`, or
/// `estimate = "header:x-max-tokens"` (the request header's decimal; a
/// request without it, or with a value that is not a decimal, reserves 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Estimate {
    /// The same for every request.
    Fixed(u64),
    /// The decimal in this request header (1 without it).
    Header(HeaderName),
}

impl Estimate {
    /// The cost the layer reserves.
    pub(super) fn cost(&self) -> Box<dyn Cost> {
        match self {
            Self::Fixed(n) => Box::new(FixedCost(*n)),
            Self::Header(name) => Box::new(HeaderCost::new(name.clone(), 1)),
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
