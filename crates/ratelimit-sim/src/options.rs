//! The algorithms on the command line: which one, with which settings.

use crate::error::SimError;
use crate::values::{cli_error, duration};
use clap::{Parser, Subcommand, ValueEnum};
use ratelimit_core::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, AnyTokenBucket};
use ratelimit_core::{AnyAlgorithm, FixedWindow, SlidingLog, SlidingWindow};
use std::time::Duration;

/// What `ratelimit-sim ALGORITHM` reads and writes: shown by `--help` of
/// the command and of every algorithm.
pub(crate) const REPLAY_HELP: &str = "\
Replay: `ratelimit-sim ALGORITHM [OPTIONS] < TRACE` reads a trace on standard input,
one request per line:

  T_MS KEY [COST]

  T_MS       the time in integer milliseconds since 0, never decreasing
  KEY        the key (no spaces); keys are limited independently
  COST       the cost of the request (default 1)
  Blank lines and `#` comments are skipped.

It decides each request through the in-memory store on a manual clock set to
T_MS, and writes one line per request:

  T_MS KEY allow|deny REMAINING WAIT_MS

  T_MS, KEY  as read
  allow|deny the decision
  REMAINING  how many more requests of cost 1 would be admitted at the same instant
  WAIT_MS    for `deny`: the shortest wait after which the same request would be
             admitted, in milliseconds rounded up; `inf` when it never can be (its
             cost exceeds the capacity). For `allow`: how long the request is held
             before it goes on (the leaky bucket's queue; 0 for the other algorithms)

A bad line stops the run: exit status 2, one message naming the line number on
standard error, and nothing printed for that line or after it.

Durations (P, ...) are an integer and a unit: ms, s, m, h or d (500ms, 1s, 1d).

Example:
  $ printf '0 a\\n100 a\\n334 a\\n' | ratelimit-sim gcra --limit 3 --period 1s --burst 1
  0 a allow 0 0
  100 a deny 0 234
  334 a allow 0 0";

/// An algorithm and its settings, as written on the command line
/// (`gcra --limit 10 --period 1s`) and in `--algo`.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "fixed-window", "--limit", "10", "--period", "1m"]).unwrap();
/// let Some(Command::Algorithm(algorithm)) = cli.command else { panic!() };
/// assert_eq!(algorithm.build().unwrap().to_string(), "fixed-window 10/1m");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AlgorithmArgs {
    /// GCRA: L per P, with bursts of up to B
    #[command(after_help = REPLAY_HELP)]
    Gcra {
        /// Requests per period P
        #[arg(long, value_name = "L", allow_negative_numbers = true)]
        limit: u64,
        /// The period
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
        /// How many may come at once [default: L]
        #[arg(long, value_name = "B", allow_negative_numbers = true)]
        burst: Option<u64>,
    },
    /// Token bucket: C tokens, refilled by R per P (decides as GCRA does)
    #[command(after_help = REPLAY_HELP)]
    TokenBucket {
        /// The bucket's capacity
        #[arg(long, value_name = "C", allow_negative_numbers = true)]
        capacity: u64,
        /// Tokens added per P
        #[arg(long, value_name = "R", allow_negative_numbers = true)]
        refill: u64,
        /// The refill period
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
    },
    /// Leaky bucket (a queue): L per P go on, up to Q more wait their turn
    #[command(after_help = REPLAY_HELP)]
    LeakyBucket {
        /// Requests per period P on...
        #[arg(long, value_name = "L", allow_negative_numbers = true)]
        limit: u64,
        /// The period
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
        /// How many admitted requests may wait (0: none)
        #[arg(long, value_name = "Q", allow_negative_numbers = true)]
        queue: u64,
    },
    /// Fixed window: at most L per window of length P
    #[command(after_help = REPLAY_HELP)]
    FixedWindow {
        /// The most admitted per window
        #[arg(long, value_name = "L", allow_negative_numbers = true)]
        limit: u64,
        /// The window's length
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
        /// Where windows start
        #[arg(long, value_enum, default_value_t = AnchorArg::Aligned)]
        anchor: AnchorArg,
    },
    /// Sliding log: at most L in any interval of length P (exact)
    #[command(after_help = REPLAY_HELP)]
    SlidingLog {
        /// The most admitted in any interval of length P
        #[arg(long, value_name = "L", allow_negative_numbers = true)]
        limit: u64,
        /// The interval's length
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
    },
    /// Sliding window: the sliding log estimated from two fixed windows' counters
    #[command(after_help = REPLAY_HELP)]
    SlidingWindow {
        /// The most admitted per (estimated) interval of length P
        #[arg(long, value_name = "L", allow_negative_numbers = true)]
        limit: u64,
        /// The window's length
        #[arg(long, value_name = "P", value_parser = duration, allow_hyphen_values = true)]
        period: Duration,
    },
}

/// Where a fixed window starts (`--anchor`).
///
/// ```
/// use ratelimit_sim::parse_algorithm;
///
/// let words = ["fixed-window", "--limit", "10", "--period", "1s", "--anchor", "first-request"];
/// assert!(parse_algorithm(&words.map(String::from)).is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnchorArg {
    /// Windows [k*P, (k+1)*P) counted from time 0
    Aligned,
    /// A window opens at the first request admitted after the previous one ended
    FirstRequest,
}

impl AlgorithmArgs {
    /// The algorithm. GCRA and the buckets keep the 8-byte state when it
    /// holds the setting, and the 16-byte one otherwise (`AnyGcra` and the
    /// like), so every setting the exact arithmetic allows is accepted.
    pub fn build(&self) -> Result<AnyAlgorithm, SimError> {
        Ok(match *self {
            Self::Gcra {
                limit,
                period,
                burst,
            } => AnyGcra::with_burst(limit, period, burst.unwrap_or(limit))?.into(),
            Self::TokenBucket {
                capacity,
                refill,
                period,
            } => AnyTokenBucket::new(capacity, refill, period)?.into(),
            Self::LeakyBucket {
                limit,
                period,
                queue,
            } => AnyLeakyBucket::new(limit, period, queue)?.into(),
            Self::FixedWindow {
                limit,
                period,
                anchor,
            } => {
                let anchor = match anchor {
                    AnchorArg::Aligned => Anchor::Aligned,
                    AnchorArg::FirstRequest => Anchor::FirstRequest,
                };
                FixedWindow::new(limit, period)?.with_anchor(anchor)?.into()
            }
            Self::SlidingLog { limit, period } => SlidingLog::new(limit, period)?.into(),
            Self::SlidingWindow { limit, period } => SlidingWindow::new(limit, period)?.into(),
        })
    }
}

/// `ALGORITHM [OPTIONS]` on its own, as in `--algo`.
#[derive(Debug, Parser)]
#[command(name = "ALGORITHM", no_binary_name = true)]
struct AlgorithmLine {
    #[command(subcommand)]
    algorithm: AlgorithmArgs,
}

/// Parses `ALGORITHM [OPTIONS]` into the algorithm it names (see
/// [`AlgorithmArgs::build`]).
///
/// ```
/// use ratelimit_sim::parse_algorithm;
/// let args: Vec<String> = ["gcra", "--limit", "3", "--period", "1s"].map(String::from).to_vec();
/// assert!(parse_algorithm(&args).is_ok());
/// let bad: Vec<String> = ["gcra", "--limit", "0", "--period", "1s"].map(String::from).to_vec();
/// assert!(parse_algorithm(&bad).is_err());
/// ```
pub fn parse_algorithm(args: &[String]) -> Result<AnyAlgorithm, SimError> {
    if args.is_empty() {
        return Err(SimError("missing ALGORITHM".to_owned()));
    }
    let line = AlgorithmLine::try_parse_from(args).map_err(|e| cli_error(&e, "algorithm"))?;
    line.algorithm.build()
}
