//! The serde forms of an [`AnyAlgorithm`], documented on it.

use super::{fixed_window, parse_period, Period, SpecError};
use crate::algorithm::{AnyGcra, AnyLeakyBucket, AnyTokenBucket, DEFAULT_MAX_LOG_ENTRIES};
use crate::{AnyAlgorithm, SlidingLog, SlidingWindow};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

impl Serialize for AnyAlgorithm {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn period<'de, D: Deserializer<'de>>(d: D) -> Result<Period, D::Error> {
    let s = String::deserialize(d)?;
    parse_period(&s).map_err(de::Error::custom)
}

#[derive(Deserialize)]
#[serde(tag = "algorithm", rename_all = "kebab-case", deny_unknown_fields)]
enum Table {
    Gcra {
        limit: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
        burst: Option<u64>,
    },
    TokenBucket {
        capacity: u64,
        refill: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
    },
    LeakyBucket {
        limit: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
        queue: Option<u64>,
    },
    FixedWindow {
        limit: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
        anchor: Option<String>,
    },
    SlidingLog {
        limit: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
        #[serde(rename = "max-entries")]
        max_entries: Option<u64>,
    },
    SlidingWindow {
        limit: u64,
        #[serde(deserialize_with = "period")]
        period: Period,
    },
}

impl TryFrom<Table> for AnyAlgorithm {
    type Error = SpecError;

    fn try_from(t: Table) -> Result<Self, SpecError> {
        Ok(match t {
            Table::Gcra {
                limit,
                period,
                burst,
            } => {
                let period = period.fixed("gcra")?;
                AnyGcra::with_burst(limit, period, burst.unwrap_or(limit))?.into()
            }
            Table::TokenBucket {
                capacity,
                refill,
                period,
            } => AnyTokenBucket::new(capacity, refill, period.fixed("token-bucket")?)?.into(),
            Table::LeakyBucket {
                limit,
                period,
                queue,
            } => {
                let period = period.fixed("leaky-bucket")?;
                AnyLeakyBucket::new(limit, period, queue.unwrap_or(0))?.into()
            }
            Table::FixedWindow {
                limit,
                period,
                anchor,
            } => fixed_window(limit, period, anchor.as_deref())?.into(),
            Table::SlidingLog {
                limit,
                period,
                max_entries,
            } => SlidingLog::with_max_entries(
                limit,
                period.fixed("sliding-log")?,
                max_entries.unwrap_or(DEFAULT_MAX_LOG_ENTRIES),
            )?
            .into(),
            Table::SlidingWindow { limit, period } => {
                SlidingWindow::new(limit, period.fixed("sliding-window")?)?.into()
            }
        })
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = AnyAlgorithm;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "an algorithm spec like \"gcra 100/1m burst 20\", or a table with an `algorithm` field",
        )
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<AnyAlgorithm, E> {
        s.parse().map_err(E::custom)
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<AnyAlgorithm, M::Error> {
        let table = Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
        AnyAlgorithm::try_from(table).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for AnyAlgorithm {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SpecVisitor)
    }
}
