//! The command line (through `clap`): the command, its subcommands and what
//! `plot` and `compare` share: the algorithms to compare and the trace to
//! run them on.

use crate::compare::CompareArgs;
use crate::generate::GeneratorArgs;
use crate::options::REPLAY_HELP;
use crate::plot::PlotArgs;
use crate::{
    parse_algorithm, parse_generator, parse_line, AlgorithmArgs, Event, Generator, SimError,
};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, Parser, Subcommand};
use ratelimit_core::{parse_duration, AnyAlgorithm};
use std::io::BufRead;
use std::time::Duration;

/// `ratelimit-sim`: its arguments.
#[derive(Debug, Parser)]
#[command(
    name = "ratelimit-sim",
    version,
    about = "Replays a trace through any ratelimit-core algorithm, and plots or compares algorithms.",
    propagate_version = true,
    override_usage = "ratelimit-sim <ALGORITHM> [OPTIONS] < TRACE\n       ratelimit-sim <generate|compare|plot|what-if> [OPTIONS]",
    subcommand_value_name = "ALGORITHM|SUBCOMMAND",
    subcommand_help_heading = "Algorithms (replay a trace) and subcommands (each with --help)",
    after_help = REPLAY_HELP
)]
pub struct Cli {
    /// What to run (`None`: nothing was given).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What `ratelimit-sim` runs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replays the trace on standard input through this algorithm.
    #[command(flatten)]
    Algorithm(AlgorithmArgs),
    /// Print a seeded trace: steady, bursty, poisson or window-edge traffic
    #[command(
        after_help = GENERATE_HELP,
        arg_required_else_help = false,
        subcommand_value_name = "GENERATOR",
        subcommand_help_heading = "Generators (each with --help)"
    )]
    Generate {
        /// The generator and its options.
        #[command(subcommand)]
        generator: GeneratorArgs,
    },
    /// Run one trace through several algorithms: one table row each
    Compare(CompareArgs),
    /// Draw one trace through several algorithms as an SVG chart, one panel each
    Plot(PlotArgs),
    /// Replay an access log through a policy file: who would have been limited
    WhatIf(crate::whatif::WhatIfArgs),
}

const GENERATE_HELP: &str = "\
The trace is printed as lines `T_MS KEY COST`, the input of `ratelimit-sim ALGORITHM`,
`compare` and `plot`; times are integer milliseconds, never decreasing. The same
options and seed give the same trace every time.

Example:
  $ ratelimit-sim generate poisson --rate 20 --period 1s --seed 7 | ratelimit-sim gcra --limit 10 --period 1s";

/// Parses a duration option with [`parse_duration`].
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration of more than zero (`--interval`, `--bin`).
pub(crate) fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be positive".to_owned()),
        d => Ok(d),
    }
}

/// A clap error on one line, naming the bad value: `noun` names what a
/// subcommand position stands for (`algorithm`, `generator`). A hint at
/// the command's `--help` follows when the error is about `ratelimit-sim`
/// itself.
pub fn cli_error(e: &clap::Error, noun: &str) -> SimError {
    let rendered = e.render().to_string();
    let (body, usage) = rendered
        .split_once("\nUsage:")
        .unwrap_or((rendered.as_str(), ""));
    let names = |kind| match e.get(kind) {
        Some(ContextValue::String(name)) => vec![name.as_str()],
        Some(ContextValue::Strings(names)) => names.iter().map(String::as_str).collect(),
        _ => Vec::new(),
    };
    let mut out = String::new();
    match e.kind() {
        ErrorKind::InvalidSubcommand if !names(ContextKind::InvalidSubcommand).is_empty() => {
            out = format!(
                "unknown {noun} {:?}",
                names(ContextKind::InvalidSubcommand)[0]
            );
            if let Some(similar) = names(ContextKind::SuggestedSubcommand).first() {
                out.push_str(&format!(" (did you mean {similar:?}?)"));
            }
        }
        ErrorKind::MissingSubcommand => {
            let valid: Vec<&str> = names(ContextKind::ValidSubcommand)
                .into_iter()
                .filter(|n| *n != "help")
                .collect();
            out = format!("missing {noun}: one of {}", valid.join(", "));
        }
        _ => {
            let lines = body.lines().map(str::trim).filter(|l| !l.is_empty());
            for line in lines.take_while(|l| !l.starts_with("For more information")) {
                let line = line.strip_prefix("error: ").unwrap_or(line);
                if line.starts_with("tip: to pass") {
                    continue;
                }
                let line = line.strip_prefix("tip: ").unwrap_or(line);
                if !out.is_empty() {
                    let joined = out.ends_with(':') || line.starts_with('[');
                    out.push_str(if joined { " " } else { "; " });
                }
                out.push_str(line);
            }
        }
    }
    // `ratelimit-sim gcra [OPTIONS] ...`: the command is the words before
    // the first option or placeholder.
    let command: Vec<&str> = usage
        .split_whitespace()
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect();
    if command.first() == Some(&"ratelimit-sim") {
        out.push_str(&format!("; see '{} --help'", command.join(" ")));
    }
    SimError(out)
}

/// One algorithm to run, with the text it was written as.
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
        match &self.algorithm {
            AnyAlgorithm::Gcra(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::TokenBucket(a) => (a.refill(), a.period()),
            AnyAlgorithm::LeakyBucket(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::FixedWindow(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::SlidingLog(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::SlidingWindow(a) => (a.rate_limit(), a.period()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn clap_errors_fit_on_one_line() {
        let err = |args: &[&str]| {
            let e = Cli::try_parse_from(args).unwrap_err();
            cli_error(&e, "algorithm or subcommand").0
        };
        assert_eq!(
            err(&["ratelimit-sim", "gcrb"]),
            "unknown algorithm or subcommand \"gcrb\" (did you mean \"gcra\"?); see 'ratelimit-sim --help'"
        );
        let e = err(&["ratelimit-sim", "gcra", "--limit", "3"]);
        assert!(e.contains("--period <P>"), "{e}");
        assert!(e.ends_with("; see 'ratelimit-sim gcra --help'"), "{e}");
        let e = err(&["ratelimit-sim", "gcra", "--limit", "x", "--period", "1s"]);
        assert!(e.contains("'x'") && e.contains("--limit <L>"), "{e}");
        for e in [e, err(&["ratelimit-sim", "plot", "--bogus", "1"])] {
            assert!(!e.contains('\n') && !e.starts_with("error"), "{e:?}");
        }
    }

    #[test]
    fn specs_split_on_semicolons() {
        let specs = parse_specs(&strings(&[
            "gcra --limit 10 --period 1s;  fixed-window  --limit 10 --period 1s ;",
            "sliding-log --limit 5 --period 2s",
        ]))
        .unwrap();
        let labels: Vec<&str> = specs.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "gcra --limit 10 --period 1s",
                "fixed-window --limit 10 --period 1s",
                "sliding-log --limit 5 --period 2s"
            ]
        );
        assert_eq!(specs[2].rate(), (5, Duration::from_secs(2)));
        let err = parse_specs(&strings(&["gcra --limit 0 --period 1s"])).unwrap_err();
        assert!(err
            .0
            .starts_with("algorithm \"gcra --limit 0 --period 1s\": "));
    }

    #[test]
    fn specs_in_the_core_form() {
        for (core, options) in [
            (
                "gcra 10/1s burst 3",
                "gcra --limit 10 --period 1s --burst 3",
            ),
            (
                "token-bucket 5 refill 2/1s",
                "token-bucket --capacity 5 --refill 2 --period 1s",
            ),
            (
                "leaky-bucket 4/1s queue 2",
                "leaky-bucket --limit 4 --period 1s --queue 2",
            ),
            (
                "fixed-window 3/1m anchor first-request",
                "fixed-window --limit 3 --period 1m --anchor first-request",
            ),
            ("sliding-log 2/1d", "sliding-log --limit 2 --period 1d"),
            (
                "sliding-window 6/1h",
                "sliding-window --limit 6 --period 1h",
            ),
        ] {
            assert_eq!(spec(core).algorithm, spec(options).algorithm, "{core}");
            assert_eq!(spec(core).label, core);
        }
        let err = parse_specs(&strings(&["gcra 10/1s brust 3"])).unwrap_err();
        assert_eq!(
            err.0,
            "algorithm \"gcra 10/1s brust 3\": gcra has no option \"brust\""
        );
    }

    #[test]
    fn all_algorithms_share_the_rate() {
        let all = all_algorithms(10, "1s").unwrap();
        assert_eq!(all.len(), 6);
        for s in &all {
            assert_eq!(s.rate(), (10, Duration::from_secs(1)), "{}", s.label);
        }
        assert_eq!(
            spec("token-bucket --capacity 5 --refill 2 --period 1s").rate(),
            (2, Duration::from_secs(1))
        );
    }

    #[test]
    fn read_trace_names_the_bad_line() {
        let ok = read_trace("0 a\n# c\n\n5 b 2\n".as_bytes()).unwrap();
        assert_eq!(ok.len(), 2);
        let err = read_trace("0 a\n10 a\n5 a\n".as_bytes()).unwrap_err();
        assert_eq!(err.0, "line 3: time 5 is before the previous time 10");
        let err = read_trace("0 a\nx a\n".as_bytes()).unwrap_err();
        assert!(err.0.starts_with("line 2: bad time"), "{}", err.0);
    }
}
