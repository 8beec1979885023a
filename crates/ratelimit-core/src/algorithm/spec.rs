//! Algorithms as text: one line names an algorithm and its settings
//! (`gcra 100/1m burst 20`), parsed by [`AnyAlgorithm`]'s `FromStr` and
//! printed back by its `Display`.
//!
//! The form is documented on [`AnyAlgorithm`].

use crate::algorithm::CalendarUnit;
use crate::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, AnyTokenBucket, DEFAULT_MAX_LOG_ENTRIES};
use crate::plumbing::{format_duration, parse_fine_duration};
use crate::ConfigError;
use crate::{AnyAlgorithm, FixedWindow, SlidingLog, SlidingWindow};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Why a text spec is not an algorithm. Every variant names the word at
/// fault.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    /// Nothing but white space.
    Empty,
    /// The first word is not one of the six algorithms' names.
    UnknownAlgorithm(String),
    /// The rate word is missing.
    MissingRate {
        /// The algorithm.
        algorithm: &'static str,
    },
    /// A word that should be a rate `L/P` is not one.
    BadRate(String),
    /// A word that should be a non-negative integer is not one.
    BadNumber {
        /// What the number is (`burst`, `limit`, ...).
        what: &'static str,
        /// The word.
        token: String,
    },
    /// A duration that could not be parsed.
    BadDuration(String),
    /// An option this algorithm does not have.
    UnknownOption {
        /// The algorithm.
        algorithm: &'static str,
        /// The word.
        token: String,
    },
    /// An option with no value after it.
    MissingValue(String),
    /// An option given twice.
    Duplicate(String),
    /// A required option left out (`refill` of the token bucket).
    MissingOption {
        /// The algorithm.
        algorithm: &'static str,
        /// The option.
        option: &'static str,
    },
    /// An anchor other than `aligned`, `first-request` and `key-offset`.
    BadAnchor(String),
    /// A period that looks like a calendar unit but is not spelled `week`,
    /// `month` or `year` (`1mo`, `1w`, `2month`, `years`).
    BadCalendarPeriod(String),
    /// A calendar period (`week`, `month`, `year`) given to an algorithm
    /// other than the fixed window.
    CalendarUnsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// The period's word.
        period: String,
    },
    /// An anchor other than `aligned` with a calendar period: calendar
    /// windows are aligned on the UTC calendar.
    CalendarAnchor(String),
    /// Well formed, but the algorithm's constructor rejects the settings.
    Invalid(ConfigError),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty algorithm spec"),
            Self::UnknownAlgorithm(w) => write!(
                f,
                "unknown algorithm {w:?}: expected gcra, token-bucket, leaky-bucket, \
                 fixed-window, sliding-log or sliding-window"
            ),
            Self::MissingRate { algorithm } => {
                write!(f, "{algorithm}: missing the rate, like 100/1m")
            }
            Self::BadRate(w) => write!(
                f,
                "bad rate {w:?}: expected an integer, a slash and a duration, like 100/1m"
            ),
            Self::BadNumber { what, token } => {
                write!(f, "bad {what} {token:?}: expected a non-negative integer")
            }
            Self::BadDuration(w) => write!(
                f,
                "bad duration {w:?}: expected an integer and a unit (ns, us, ms, s, m, h, d), like 500ms or 1h"
            ),
            Self::UnknownOption { algorithm, token } => {
                write!(f, "{algorithm} has no option {token:?}")
            }
            Self::MissingValue(w) => write!(f, "option {w:?} has no value"),
            Self::Duplicate(w) => write!(f, "option {w:?} given twice"),
            Self::MissingOption { algorithm, option } => {
                write!(f, "{algorithm} needs the option {option:?}")
            }
            Self::BadAnchor(w) => write!(
                f,
                "bad anchor {w:?}: expected aligned, first-request or key-offset"
            ),
            Self::BadCalendarPeriod(w) => write!(
                f,
                "bad period {w:?}: a calendar period is written week, month or year \
                 (one unit, no number; m is minutes)"
            ),
            Self::CalendarUnsupported { algorithm, period } => write!(
                f,
                "{algorithm} cannot take the calendar period {period:?}: only fixed-window \
                 follows the calendar; write a duration (7d is a week)"
            ),
            Self::CalendarAnchor(w) => write!(
                f,
                "anchor {w:?} does not apply to a calendar period: its windows are \
                 aligned on the UTC calendar"
            ),
            Self::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for SpecError {
    fn from(e: ConfigError) -> Self {
        Self::Invalid(e)
    }
}

/// The names, in the contract's spelling.
const NAMES: [&str; 6] = [
    "gcra",
    "token-bucket",
    "leaky-bucket",
    "fixed-window",
    "sliding-log",
    "sliding-window",
];

/// A rate's period: a duration, or a unit of the UTC calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Fixed(Duration),
    Calendar(CalendarUnit),
}

impl Period {
    /// The duration, or for a calendar unit the error naming `algorithm`
    /// (only the fixed window follows the calendar).
    fn fixed(self, algorithm: &'static str) -> Result<Duration, SpecError> {
        match self {
            Self::Fixed(d) => Ok(d),
            Self::Calendar(unit) => Err(SpecError::CalendarUnsupported {
                algorithm,
                period: unit.name().to_owned(),
            }),
        }
    }
}

/// Units a reader may take for a calendar unit: refused, with the spelling.
const CALENDAR_LOOKALIKES: [&str; 12] = [
    "w", "wk", "week", "weeks", "mo", "mon", "month", "months", "y", "yr", "year", "years",
];

/// Parses a period: `week`, `month`, `year`, or a duration (`10/s` is
/// `10/1s`).
pub(crate) fn parse_period(p: &str) -> Result<Period, SpecError> {
    if let Some(unit) = CalendarUnit::from_name(p) {
        return Ok(Period::Calendar(unit));
    }
    let unit = p.trim_start_matches(|c: char| c.is_ascii_digit());
    if CALENDAR_LOOKALIKES.contains(&unit.to_ascii_lowercase().as_str()) {
        return Err(SpecError::BadCalendarPeriod(p.to_owned()));
    }
    let period = if unit.len() < p.len() {
        parse_fine_duration(p)
    } else {
        parse_fine_duration(&format!("1{p}"))
    };
    period
        .map(Period::Fixed)
        .map_err(|_| SpecError::BadDuration(p.to_owned()))
}

/// Parses `L/P`.
pub(crate) fn parse_rate(word: &str) -> Result<(u64, Period), SpecError> {
    let bad = || SpecError::BadRate(word.to_owned());
    let (l, p) = word.split_once('/').ok_or_else(bad)?;
    let limit = parse_number(l, "limit").map_err(|_| bad())?;
    Ok((limit, parse_period(p)?))
}

/// A fixed window of `limit` per `period`, anchored at `anchor` (the
/// default when `None`; a calendar period takes only `aligned`).
pub(crate) fn fixed_window(
    limit: u64,
    period: Period,
    anchor: Option<&str>,
) -> Result<FixedWindow, SpecError> {
    let anchor = anchor
        .map(|a| parse_anchor(a).map(|p| (a, p)))
        .transpose()?;
    match (period, anchor) {
        (Period::Fixed(d), anchor) => {
            Ok(FixedWindow::new(limit, d)?.with_anchor(anchor.map(|(_, a)| a).unwrap_or_default()))
        }
        (Period::Calendar(_), Some((word, a))) if a != Anchor::Aligned => {
            Err(SpecError::CalendarAnchor(word.to_owned()))
        }
        (Period::Calendar(unit), _) => Ok(FixedWindow::per_calendar_unit(limit, unit)?),
    }
}

fn parse_number(word: &str, what: &'static str) -> Result<u64, SpecError> {
    // `u64::from_str` takes a leading `+`; the form does not.
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SpecError::BadNumber {
            what,
            token: word.to_owned(),
        });
    }
    word.parse().map_err(|_| SpecError::BadNumber {
        what,
        token: word.to_owned(),
    })
}

/// The options after the rate, checked against the algorithm's names.
struct Options<'a> {
    algorithm: &'static str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Options<'a> {
    fn parse(
        algorithm: &'static str,
        allowed: &[&str],
        mut words: impl Iterator<Item = &'a str>,
    ) -> Result<Self, SpecError> {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        while let Some(name) = words.next() {
            if !allowed.contains(&name) {
                return Err(SpecError::UnknownOption {
                    algorithm,
                    token: name.to_owned(),
                });
            }
            let value = words
                .next()
                .ok_or_else(|| SpecError::MissingValue(name.to_owned()))?;
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(SpecError::Duplicate(name.to_owned()));
            }
            pairs.push((name, value));
        }
        Ok(Self { algorithm, pairs })
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn number(&self, name: &'static str) -> Result<Option<u64>, SpecError> {
        self.get(name).map(|v| parse_number(v, name)).transpose()
    }

    fn required(&self, name: &'static str) -> Result<&'a str, SpecError> {
        self.get(name).ok_or(SpecError::MissingOption {
            algorithm: self.algorithm,
            option: name,
        })
    }
}

/// Parses an anchor's name.
pub(crate) fn parse_anchor(word: &str) -> Result<Anchor, SpecError> {
    match word {
        "aligned" => Ok(Anchor::Aligned),
        "first-request" => Ok(Anchor::FirstRequest),
        "key-offset" => Ok(Anchor::KeyOffset),
        _ => Err(SpecError::BadAnchor(word.to_owned())),
    }
}

/// An anchor's name in the form.
pub(crate) fn anchor_name(anchor: Anchor) -> &'static str {
    match anchor {
        Anchor::Aligned => "aligned",
        Anchor::FirstRequest => "first-request",
        Anchor::KeyOffset => "key-offset",
    }
}

impl FromStr for AnyAlgorithm {
    type Err = SpecError;

    /// Parses the text form (see [`AnyAlgorithm`]).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let mut words = s.split_whitespace();
        let first = words.next().ok_or(SpecError::Empty)?;
        let algorithm = NAMES
            .iter()
            .copied()
            .find(|n| *n == first)
            .ok_or_else(|| SpecError::UnknownAlgorithm(first.to_owned()))?;
        let rate = words.next().ok_or(SpecError::MissingRate { algorithm })?;
        // `token-bucket C refill R/P`: the first word is the capacity alone.
        let (limit, period) = if algorithm == "token-bucket" {
            (
                parse_number(rate, "capacity")?,
                Period::Fixed(Duration::ZERO),
            )
        } else {
            parse_rate(rate)?
        };
        let allowed: &[&str] = match algorithm {
            "gcra" => &["burst"],
            "token-bucket" => &["refill"],
            "leaky-bucket" => &["queue"],
            "fixed-window" => &["anchor"],
            "sliding-log" => &["max-entries"],
            _ => &[],
        };
        let options = Options::parse(algorithm, allowed, words)?;
        if algorithm == "fixed-window" {
            return Ok(fixed_window(limit, period, options.get("anchor"))?.into());
        }
        let period = period.fixed(algorithm)?;
        Ok(match algorithm {
            "gcra" => {
                let burst = options.number("burst")?.unwrap_or(limit);
                AnyGcra::with_burst(limit, period, burst)?.into()
            }
            "token-bucket" => {
                let (refill, period) = parse_rate(options.required("refill")?)?;
                AnyTokenBucket::new(limit, refill, period.fixed(algorithm)?)?.into()
            }
            "leaky-bucket" => {
                let queue = options.number("queue")?.unwrap_or(0);
                AnyLeakyBucket::new(limit, period, queue)?.into()
            }
            "sliding-log" => {
                let max = options
                    .number("max-entries")?
                    .unwrap_or(DEFAULT_MAX_LOG_ENTRIES);
                SlidingLog::with_max_entries(limit, period, max)?.into()
            }
            _ => SlidingWindow::new(limit, period)?.into(),
        })
    }
}

/// `L/P` with the period in its largest exact unit.
struct Rate(u64, Duration);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0, format_duration(self.1))
    }
}

impl fmt::Display for AnyAlgorithm {
    /// The canonical text form (see [`AnyAlgorithm`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::Algorithm;
        let name = self.name();
        match self {
            Self::Gcra(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.burst() != a.rate_limit() {
                    write!(f, " burst {}", a.burst())?;
                }
                Ok(())
            }
            Self::TokenBucket(a) => write!(
                f,
                "{name} {} refill {}",
                a.capacity(),
                Rate(a.refill(), a.period())
            ),
            Self::LeakyBucket(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.queue() != 0 {
                    write!(f, " queue {}", a.queue())?;
                }
                Ok(())
            }
            Self::FixedWindow(a) => {
                match a.calendar_unit() {
                    Some(unit) => write!(f, "{name} {}/{unit}", a.rate_limit())?,
                    None => write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?,
                }
                if a.anchor() != Anchor::Aligned {
                    write!(f, " anchor {}", anchor_name(a.anchor()))?;
                }
                Ok(())
            }
            Self::SlidingLog(a) => {
                write!(f, "{name} {}", Rate(a.rate_limit(), a.period()))?;
                if a.rate_limit() > DEFAULT_MAX_LOG_ENTRIES {
                    write!(f, " max-entries {}", a.rate_limit())?;
                }
                Ok(())
            }
            Self::SlidingWindow(a) => write!(f, "{name} {}", Rate(a.rate_limit(), a.period())),
        }
    }
}

/// The serde forms, documented on [`AnyAlgorithm`].
#[cfg(feature = "serde")]
mod serde_impl {
    use super::{fixed_window, parse_period, Period};
    use crate::algorithm::{AnyGcra, AnyLeakyBucket, AnyTokenBucket, DEFAULT_MAX_LOG_ENTRIES};
    use crate::{AnyAlgorithm, SpecError};
    use crate::{SlidingLog, SlidingWindow};
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
            f.write_str("an algorithm spec like \"gcra 100/1m burst 20\", or a table with an `algorithm` field")
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<AnyAlgorithm, SpecError> {
        s.parse()
    }

    #[test]
    fn every_algorithm_round_trips() {
        for s in [
            "gcra 100/1m burst 20",
            "gcra 3/1s",
            "token-bucket 500 refill 100/1s",
            "leaky-bucket 10/1s queue 5",
            "leaky-bucket 10/1s",
            "fixed-window 200/1d anchor key-offset",
            "fixed-window 200/1d anchor first-request",
            "fixed-window 200/1d",
            "fixed-window 1000/week",
            "fixed-window 1000/month",
            "fixed-window 1/year",
            "sliding-log 2/1d",
            "sliding-log 20000/1h max-entries 20000",
            "sliding-window 60/1m",
            "gcra 7/1500us",
            "gcra 7/3ns",
        ] {
            let a = parse(s).unwrap();
            assert_eq!(a.to_string(), s);
        }
    }

    #[test]
    fn canonical_form() {
        for (s, canonical) in [
            ("gcra  10/s", "gcra 10/1s"),
            ("gcra 10/60s burst 10", "gcra 10/1m"),
            ("fixed-window 5/1000ms anchor aligned", "fixed-window 5/1s"),
            (
                "fixed-window 5/month anchor aligned",
                "fixed-window 5/month",
            ),
            ("sliding-log 5/90m max-entries 7", "sliding-log 5/90m"),
            ("leaky-bucket 1/1s queue 0", "leaky-bucket 1/1s"),
            ("gcra 1/1s burst 3", "gcra 1/1s burst 3"),
            ("gcra 1/1s burst 3 ", "gcra 1/1s burst 3"),
        ] {
            assert_eq!(parse(s).unwrap().to_string(), canonical, "{s}");
        }
    }

    #[test]
    fn errors_name_the_word() {
        use SpecError::*;
        let cases: Vec<(&str, SpecError)> = vec![
            ("", Empty),
            ("gcar 1/1s", UnknownAlgorithm("gcar".into())),
            ("gcra", MissingRate { algorithm: "gcra" }),
            ("gcra 10", BadRate("10".into())),
            ("gcra x/1s", BadRate("x/1s".into())),
            ("gcra +1/1s", BadRate("+1/1s".into())),
            ("gcra 1/1y", BadCalendarPeriod("1y".into())),
            ("fixed-window 1/1mo", BadCalendarPeriod("1mo".into())),
            ("fixed-window 1/1w", BadCalendarPeriod("1w".into())),
            ("fixed-window 1/2month", BadCalendarPeriod("2month".into())),
            ("fixed-window 1/years", BadCalendarPeriod("years".into())),
            ("fixed-window 1/1x", BadDuration("1x".into())),
            (
                "gcra 1/month",
                CalendarUnsupported {
                    algorithm: "gcra",
                    period: "month".into(),
                },
            ),
            (
                "token-bucket 5 refill 1/week",
                CalendarUnsupported {
                    algorithm: "token-bucket",
                    period: "week".into(),
                },
            ),
            (
                "sliding-window 1/year",
                CalendarUnsupported {
                    algorithm: "sliding-window",
                    period: "year".into(),
                },
            ),
            (
                "fixed-window 1/month anchor key-offset",
                CalendarAnchor("key-offset".into()),
            ),
            (
                "fixed-window 0/month",
                Invalid(ConfigError::ZeroLimit("limit")),
            ),
            ("gcra 1/1.5s", BadDuration("1.5s".into())),
            (
                "gcra 1/1s burst -1",
                BadNumber {
                    what: "burst",
                    token: "-1".into(),
                },
            ),
            (
                "gcra 1/1s queue 1",
                UnknownOption {
                    algorithm: "gcra",
                    token: "queue".into(),
                },
            ),
            ("gcra 1/1s burst", MissingValue("burst".into())),
            ("gcra 1/1s burst 1 burst 2", Duplicate("burst".into())),
            (
                "token-bucket 5",
                MissingOption {
                    algorithm: "token-bucket",
                    option: "refill",
                },
            ),
            (
                "token-bucket 5/1s refill 1/1s",
                BadNumber {
                    what: "capacity",
                    token: "5/1s".into(),
                },
            ),
            ("token-bucket 5 refill 1", BadRate("1".into())),
            ("fixed-window 1/1s anchor left", BadAnchor("left".into())),
            ("gcra 0/1s", Invalid(ConfigError::ZeroLimit("limit"))),
            ("gcra 1/0s", Invalid(ConfigError::ZeroPeriod)),
            ("gcra 1/1s burst 0", Invalid(ConfigError::ZeroBurst)),
            (
                "sliding-log 10001/1s",
                Invalid(ConfigError::LogTooLong {
                    limit: 10_001,
                    max: 10_000,
                }),
            ),
            (
                "gcra 99999999999999999999/1s",
                BadRate("99999999999999999999/1s".into()),
            ),
            (
                "sliding-window 1/1s anchor aligned",
                UnknownOption {
                    algorithm: "sliding-window",
                    token: "anchor".into(),
                },
            ),
        ];
        for (s, e) in cases {
            assert_eq!(parse(s).unwrap_err(), e, "{s}");
            assert!(!e.to_string().is_empty());
        }
    }
}
