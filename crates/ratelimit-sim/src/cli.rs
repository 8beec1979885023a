//! The command line (through `clap`): the command and its subcommands.

use crate::compare::CompareArgs;
use crate::generate::GeneratorArgs;
use crate::options::{AlgorithmArgs, REPLAY_HELP};
use crate::plot::PlotArgs;
use clap::{Parser, Subcommand};

/// `ratelimit-sim`: its arguments.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "gcra", "--limit", "10", "--period", "1s"]).unwrap();
/// let Some(Command::Algorithm(algorithm)) = cli.command else { panic!() };
/// assert!(algorithm.build().is_ok());
/// ```
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
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{run, Cli};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "gcra", "--limit", "1", "--period", "1s"]).unwrap();
/// let mut out = Vec::new();
/// run(&cli.command.unwrap(), "0 a\n0 a\n".as_bytes(), &mut out).unwrap();
/// assert_eq!(String::from_utf8(out).unwrap(), "0 a allow 0 0\n0 a deny 0 1000\n");
/// ```
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::*;
    use crate::values::cli_error;
    use std::time::Duration;

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
