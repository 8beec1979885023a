//! Parsing: a line of text to an [`AnyAlgorithm`] (its `FromStr`).

use super::SpecError;
use crate::algorithm::CalendarUnit;
use crate::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, AnyTokenBucket, DEFAULT_MAX_LOG_ENTRIES};
use crate::plumbing::parse_fine_duration;
use crate::{AnyAlgorithm, FixedWindow, SlidingLog, SlidingWindow};
use std::str::FromStr;
use std::time::Duration;

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
    pub(super) fn fixed(self, algorithm: &'static str) -> Result<Duration, SpecError> {
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
            Ok(FixedWindow::new(limit, d)?
                .with_anchor(anchor.map(|(_, a)| a).unwrap_or_default())?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConfigError;

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

    fn assert_errors(cases: Vec<(&str, SpecError)>) {
        for (s, e) in cases {
            assert_eq!(parse(s).unwrap_err(), e, "{s}");
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn errors_name_the_word() {
        use SpecError::*;
        assert_errors(vec![
            ("", Empty),
            ("gcar 1/1s", UnknownAlgorithm("gcar".into())),
            ("gcra", MissingRate { algorithm: "gcra" }),
            ("gcra 10", BadRate("10".into())),
            ("gcra x/1s", BadRate("x/1s".into())),
            ("gcra +1/1s", BadRate("+1/1s".into())),
            ("gcra 1/1.5s", BadDuration("1.5s".into())),
        ]);
    }

    #[test]
    fn calendar_errors_name_the_period() {
        use SpecError::*;
        assert_errors(vec![
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
        ]);
    }

    #[test]
    fn option_errors_name_the_option() {
        use SpecError::*;
        assert_errors(vec![
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
        ]);
    }
}
