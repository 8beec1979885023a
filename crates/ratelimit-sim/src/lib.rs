//! The `ratelimit-sim` command as a library: option parsing, trace parsing
//! and replay, so tests run the same code paths as the binary.
//!
//! `ratelimit-sim ALGORITHM [OPTIONS]` reads lines `T_MS KEY [COST]` on
//! standard input and writes `T_MS KEY allow|deny REMAINING WAIT_MS` for
//! each, deciding through [`ratelimit_core::MemoryStore`] on a manual clock.
//! The format and every algorithm's rules: [`docs/ALGORITHMS.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md).
//!
//! Three subcommands show how the algorithms differ on the same traffic, and a
//! fourth tries a policy file on a real log:
//!
//! - `ratelimit-sim generate NAME [OPTIONS]` prints a seeded trace: `steady`,
//!   `bursty`, `poisson` or the `window-edge` attack (see [`generate`](mod@generate)).
//! - `ratelimit-sim compare [OPTIONS]` prints a table, one row per
//!   algorithm: admitted, denied, held, the largest cost admitted in any
//!   half-open interval `[s, s + P)`, and the share of requests the exact
//!   sliding log would have decided otherwise given the same history (see
//!   [`compare`](mod@compare)).
//! - `ratelimit-sim plot [OPTIONS]` draws an SVG chart, one panel per
//!   algorithm: requests admitted, held and denied over time, and the
//!   remaining capacity (see [`plot`](mod@plot)).
//! - `ratelimit-sim what-if --policy ratelimit.toml --log access.log`
//!   replays a real access log through a `tower-ratelimit` policy file, by
//!   the layer's own code, and reports who would have been limited (see
//!   [`whatif`]).
//!
//! Both `compare` and `plot` take the algorithms as `--algo "ALGORITHM
//! [OPTIONS]"` (repeated, or several separated by `;`), or, without
//! `--algo`, all six at `--limit L --period P` (default 10 per 1s); and the
//! traffic as `--generator "NAME [OPTIONS]"` or a trace on standard input.
//!
//! ```text
//! ratelimit-sim compare --generator "window-edge --limit 10 --period 1s"
//! ratelimit-sim plot --algo "gcra --limit 10 --period 1s; fixed-window --limit 10 --period 1s" \
//!     --generator "window-edge --limit 10 --period 1s --duration 4s" -o edge.svg
//! ratelimit-sim generate poisson --rate 20 --period 1s --seed 7 | ratelimit-sim gcra --limit 10 --period 1s
//! ```

mod cli;
pub mod compare;
mod error;
pub mod generate;
mod options;
pub mod plot;
mod replay;
mod setup;
mod trace;
mod values;
pub mod whatif;

pub use cli::{Cli, Command};
pub use compare::{
    compare, decide_all, format_table, max_in_interval, run_compare, CompareArgs, Row,
};
pub use error::SimError;
pub use generate::{
    format_trace, parse_generator, run_generate, CommonArgs, Generator, GeneratorArgs, Shape,
};
pub use options::{parse_algorithm, AlgorithmArgs, AnchorArg};
pub use plot::{chart_data, render_svg, run_plot, Chart, Panel, PlotArgs};
pub use replay::{format_decision, replay, Replayer};
pub use setup::{all_algorithms, parse_specs, read_trace, AlgorithmSpec, SetupArgs, Specs};
pub use trace::{parse_line, Event};
pub use values::cli_error;
pub use whatif::{run_what_if, WhatIfArgs};

use std::io::{BufRead, Write};

/// Runs `command`: replays `input` through an algorithm, or runs a
/// subcommand, writing to `output`.
pub fn run(command: &Command, input: impl BufRead, output: impl Write) -> Result<(), SimError> {
    match command {
        Command::Algorithm(algorithm) => replay(algorithm.build()?, input, output),
        Command::Generate { generator } => run_generate(&generator.build()?, output),
        Command::Compare(args) => run_compare(args, input, output),
        Command::Plot(args) => run_plot(args, input, output),
        Command::WhatIf(args) => run_what_if(args, input, output),
    }
}
