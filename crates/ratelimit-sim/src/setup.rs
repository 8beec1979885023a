//! What `plot` and `compare` share: the algorithms to compare and the trace to run them on.

use crate::error::SimError;
use crate::generate::{parse_generator, Generator};
use crate::options::parse_algorithm;
use crate::trace::{parse_line, Event};
use crate::values::duration;
use clap::Args;
use ratelimit_core::AnyAlgorithm;
use std::io::BufRead;
use std::time::Duration;

/// One algorithm to run, with the text it was written as.
///
/// ```
/// use ratelimit_sim::AlgorithmSpec;
/// use std::time::Duration;
///
/// let spec = AlgorithmSpec::parse("gcra --limit 10 --period 1s").unwrap();
/// assert_eq!(spec.rate(), (10, Duration::from_secs(1)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgorithmSpec {
    /// The spec as written, whitespace collapsed: `gcra --limit 10 --period 1s`.
    pub label: String,
    /// The algorithm.
    pub algorithm: AnyAlgorithm,
}

impl AlgorithmSpec {
    /// Parses `ALGORITHM [OPTIONS]` as in the main mode
    /// (`gcra --limit 10 --period 1s`), or ratelimit-core's spec form
    /// (`gcra 10/1s`, see `AnyAlgorithm`'s `FromStr`), from one string.
    pub fn parse(spec: &str) -> Result<Self, SimError> {
        let words: Vec<String> = spec.split_whitespace().map(String::from).collect();
        let algorithm = if words.iter().any(|w| w.starts_with("--")) {
            parse_algorithm(&words)
        } else {
            words
                .join(" ")
                .parse::<AnyAlgorithm>()
                .map_err(|e| SimError(e.to_string()))
        }
        .map_err(|e| SimError(format!("algorithm {:?}: {e}", words.join(" "))))?;
        Ok(Self {
            label: words.join(" "),
            algorithm,
        })
    }

    /// The rate `L per P` the algorithm enforces in the long run: `(L, P)`
    /// (for the token bucket, `(R, P)`).
    pub fn rate(&self) -> (u64, Duration) {
        self.algorithm.rate()
    }
}

/// Parses `--algo` values; each may hold several specs separated by `;`.
pub fn parse_specs(values: &[String]) -> Result<Vec<AlgorithmSpec>, SimError> {
    values
        .iter()
        .flat_map(|v| v.split(';'))
        .filter(|s| !s.trim().is_empty())
        .map(AlgorithmSpec::parse)
        .collect()
}

/// The six algorithms at the same rate `L per P`, tuned to the same burst
/// `L`: `gcra` (burst `L`), `token-bucket` (capacity and refill `L`),
/// `leaky-bucket` (queue `L - 1`: `L` at once, the first goes on at once),
/// `fixed-window`, `sliding-log`, `sliding-window`.
pub fn all_algorithms(limit: u64, period: &str) -> Result<Vec<AlgorithmSpec>, SimError> {
    let queue = limit.saturating_sub(1);
    let p = period;
    let specs = [
        format!("gcra --limit {limit} --period {p}"),
        format!("token-bucket --capacity {limit} --refill {limit} --period {p}"),
        format!("leaky-bucket --limit {limit} --period {p} --queue {queue}"),
        format!("fixed-window --limit {limit} --period {p}"),
        format!("sliding-log --limit {limit} --period {p}"),
        format!("sliding-window --limit {limit} --period {p}"),
    ];
    specs.iter().map(|s| AlgorithmSpec::parse(s)).collect()
}

/// Reads a whole trace; a bad line or a time going backwards is an error
/// naming the line.
pub fn read_trace(input: impl BufRead) -> Result<Vec<Event>, SimError> {
    let mut events: Vec<Event> = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let at_line = |e: SimError| SimError(format!("line {}: {}", i + 1, e.0));
        let line = line.map_err(|e| at_line(SimError(format!("i/o error: {e}"))))?;
        let Some(event) = parse_line(&line).map_err(at_line)? else {
            continue;
        };
        if let Some(prev) = events.last() {
            if event.t_ms < prev.t_ms {
                return Err(at_line(SimError(format!(
                    "time {} is before the previous time {}",
                    event.t_ms, prev.t_ms
                ))));
            }
        }
        events.push(event);
    }
    Ok(events)
}

/// The options `plot` and `compare` share: the algorithms and the traffic.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "compare", "--algo", "gcra 10/1s; sliding-log 10/1s"]).unwrap();
/// let Some(Command::Compare(args)) = cli.command else { panic!() };
/// assert_eq!(args.setup.algo[0].0.len(), 2);
/// ```
#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// An algorithm as in replay mode (`gcra --limit 10 --period 1s`) or as a spec (`gcra 10/1s burst 5`); repeat it, or separate several with ';'
    #[arg(long = "algo", value_name = "\"ALGORITHM [OPTIONS]\"", value_parser = specs)]
    pub algo: Vec<Specs>,
    /// Without --algo: all six algorithms at L per P, burst L [default: 10]
    #[arg(
        long,
        value_name = "L",
        conflicts_with = "algo",
        allow_negative_numbers = true
    )]
    pub limit: Option<u64>,
    /// Without --algo: the P of --limit [default: 1s]
    #[arg(long, value_name = "P", conflicts_with = "algo", value_parser = duration_text, allow_hyphen_values = true)]
    pub period: Option<String>,
    /// Generated traffic (see `ratelimit-sim generate --help`); repeat it to merge several. Without it, the trace (lines `T_MS KEY [COST]`) is read on standard input
    #[arg(long, value_name = "\"NAME [OPTIONS]\"", value_parser = generator)]
    pub generator: Vec<Generator>,
}

/// The algorithms of one `--algo`.
///
/// ```
/// use ratelimit_sim::{parse_specs, Specs};
///
/// let specs = Specs(parse_specs(&["gcra 10/1s; sliding-log 10/1s".to_string()]).unwrap());
/// assert_eq!(specs.0[1].label, "sliding-log 10/1s");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specs(pub Vec<AlgorithmSpec>);

fn specs(s: &str) -> Result<Specs, SimError> {
    parse_specs(&[s.to_owned()]).map(Specs)
}

/// A duration, kept as written (it names the algorithms).
fn duration_text(s: &str) -> Result<String, String> {
    duration(s).map(|_| s.to_owned())
}

fn generator(s: &str) -> Result<Generator, SimError> {
    let words: Vec<String> = s.split_whitespace().map(String::from).collect();
    parse_generator(&words)
}

/// What `plot` and `compare` run: the algorithms and the trace.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) specs: Vec<AlgorithmSpec>,
    pub(crate) events: Vec<Event>,
}

impl SetupArgs {
    /// The algorithms (`--algo`, or the six at `--limit`/`--period`) and
    /// the trace: the generators' merged in time order or, without
    /// `--generator`, the one read from `input`.
    pub(crate) fn setup(&self, input: impl BufRead) -> Result<Setup, SimError> {
        let specs = if self.algo.is_empty() {
            let period = self.period.as_deref().unwrap_or("1s");
            all_algorithms(self.limit.unwrap_or(10), period)?
        } else {
            self.algo.iter().flat_map(|s| s.0.iter().cloned()).collect()
        };
        if specs.is_empty() {
            return Err(SimError("no algorithm given".to_owned()));
        }
        let events = if self.generator.is_empty() {
            read_trace(input)?
        } else {
            let mut events: Vec<Event> =
                self.generator.iter().flat_map(Generator::events).collect();
            // Merged in time order; a stable sort keeps each generator's order.
            events.sort_by_key(|e| e.t_ms);
            events
        };
        Ok(Setup { specs, events })
    }
}

/// Keeps algorithms that are built from the same numbers comparable in
/// tests.
#[cfg(test)]
pub(crate) fn spec(s: &str) -> AlgorithmSpec {
    AlgorithmSpec::parse(s).unwrap()
}
