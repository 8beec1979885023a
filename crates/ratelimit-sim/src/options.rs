//! Command-line options: which algorithm, with which settings.

use ratelimit_core::{
    parse_duration, Anchor, AnyAlgorithm, AnyGcra, AnyLeakyBucket, AnyTokenBucket, ConfigError,
    FixedWindow, SlidingLog, SlidingWindow,
};
use std::fmt;
use std::time::Duration;

/// Why the sim stopped: bad options or a bad input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError(pub String);

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

impl From<ConfigError> for SimError {
    fn from(e: ConfigError) -> Self {
        SimError(e.to_string())
    }
}

/// The usage line.
pub fn usage() -> &'static str {
    "usage: ratelimit-sim ALGORITHM [OPTIONS] < TRACE\n\
     algorithms:\n  \
     gcra --limit L --period P [--burst B]\n  \
     token-bucket --capacity C --refill R --period P\n  \
     leaky-bucket --limit L --period P --queue Q\n  \
     fixed-window --limit L --period P [--anchor aligned|first-request]\n  \
     sliding-log --limit L --period P\n  \
     sliding-window --limit L --period P\n\
     durations: an integer and a unit (ms, s, m, h, d); trace lines: T_MS KEY [COST]"
}

/// Parsed `--name value` pairs, each allowed at most once.
struct Options {
    pairs: Vec<(String, String)>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, SimError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(SimError(format!("unexpected argument {arg:?}")));
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_owned(), v.to_owned()),
                None => {
                    let value = it
                        .next()
                        .ok_or_else(|| SimError(format!("option --{name} needs a value")))?;
                    (name.to_owned(), value.clone())
                }
            };
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(SimError(format!("option --{name} given twice")));
            }
            pairs.push((name, value));
        }
        Ok(Self { pairs })
    }

    fn take(&mut self, name: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(n, _)| n == name)?;
        Some(self.pairs.remove(i).1)
    }

    fn required(&mut self, name: &str) -> Result<String, SimError> {
        self.take(name)
            .ok_or_else(|| SimError(format!("missing option --{name}")))
    }

    fn integer(&mut self, name: &str) -> Result<Option<u64>, SimError> {
        self.take(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    SimError(format!(
                        "option --{name}: {v:?} is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    fn required_integer(&mut self, name: &str) -> Result<u64, SimError> {
        self.integer(name)?
            .ok_or_else(|| SimError(format!("missing option --{name}")))
    }

    fn period(&mut self) -> Result<Duration, SimError> {
        let v = self.required("period")?;
        parse_duration(&v).map_err(|e| SimError(format!("option --period: {e}")))
    }

    fn finish(self) -> Result<(), SimError> {
        match self.pairs.first() {
            Some((name, _)) => Err(SimError(format!(
                "unknown option --{name} for this algorithm"
            ))),
            None => Ok(()),
        }
    }
}

/// Parses `ALGORITHM [OPTIONS]` into the algorithm it names. GCRA and the
/// buckets keep the 8-byte state when it holds the setting, and the 16-byte
/// one otherwise (`AnyGcra` and the like), so every setting the exact
/// arithmetic allows is accepted.
///
/// ```
/// use ratelimit_sim::parse_algorithm;
/// let args: Vec<String> = ["gcra", "--limit", "3", "--period", "1s"].map(String::from).to_vec();
/// assert!(parse_algorithm(&args).is_ok());
/// let bad: Vec<String> = ["gcra", "--limit", "0", "--period", "1s"].map(String::from).to_vec();
/// assert!(parse_algorithm(&bad).is_err());
/// ```
pub fn parse_algorithm(args: &[String]) -> Result<AnyAlgorithm, SimError> {
    let (name, rest) = args
        .split_first()
        .ok_or_else(|| SimError("missing ALGORITHM".to_owned()))?;
    let mut o = Options::parse(rest)?;
    let algorithm: AnyAlgorithm = match name.as_str() {
        "gcra" => {
            let limit = o.required_integer("limit")?;
            let period = o.period()?;
            let burst = o.integer("burst")?.unwrap_or(limit);
            AnyGcra::with_burst(limit, period, burst)?.into()
        }
        "token-bucket" => {
            let capacity = o.required_integer("capacity")?;
            let refill = o.required_integer("refill")?;
            let period = o.period()?;
            AnyTokenBucket::new(capacity, refill, period)?.into()
        }
        "leaky-bucket" => {
            let limit = o.required_integer("limit")?;
            let period = o.period()?;
            let queue = o.required_integer("queue")?;
            AnyLeakyBucket::new(limit, period, queue)?.into()
        }
        "fixed-window" => {
            let limit = o.required_integer("limit")?;
            let period = o.period()?;
            let anchor = match o.take("anchor").as_deref() {
                None | Some("aligned") => Anchor::Aligned,
                Some("first-request") => Anchor::FirstRequest,
                Some(other) => {
                    return Err(SimError(format!(
                        "option --anchor: {other:?} is not aligned or first-request"
                    )))
                }
            };
            FixedWindow::new(limit, period)?.with_anchor(anchor).into()
        }
        "sliding-log" => {
            let limit = o.required_integer("limit")?;
            let period = o.period()?;
            SlidingLog::new(limit, period)?.into()
        }
        "sliding-window" => {
            let limit = o.required_integer("limit")?;
            let period = o.period()?;
            SlidingWindow::new(limit, period)?.into()
        }
        other => return Err(SimError(format!("unknown algorithm {other:?}"))),
    };
    o.finish()?;
    Ok(algorithm)
}
