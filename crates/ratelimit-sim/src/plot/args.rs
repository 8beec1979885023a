//! `ratelimit-sim plot`'s command line and its run: read a trace, chart it, write the SVG.

use super::data::chart_data;
use super::render::render_svg;
use crate::setup::SetupArgs;
use crate::values::positive_duration;
use crate::SimError;
use clap::Parser;
use std::io::{BufRead, Write};
use std::time::Duration;

/// `ratelimit-sim plot [OPTIONS] [< TRACE]`.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "plot", "--limit", "10", "--period", "1s", "-o", "out.svg"]).unwrap();
/// let Some(Command::Plot(args)) = cli.command else { panic!() };
/// assert_eq!(args.svg.as_deref(), Some("out.svg"));
/// ```
#[derive(Debug, Clone, Parser)]
#[command(
    name = "plot",
    override_usage = "ratelimit-sim plot [OPTIONS] [< TRACE]",
    after_help = PLOT_HELP
)]
pub struct PlotArgs {
    /// The algorithms and the traffic.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Where to write the SVG ('-': standard output) [default: standard output]
    #[arg(long, short = 'o', value_name = "FILE")]
    pub svg: Option<String>,
    /// The key to draw [default: the trace's first key]
    #[arg(long, value_name = "K")]
    pub key: Option<String>,
    /// The width of a bar [default: a round value near 1/100 of the trace]
    #[arg(long, value_name = "D", value_parser = positive_duration, allow_hyphen_values = true)]
    pub bin: Option<Duration>,
    /// The chart's title [default: ratelimit-sim: key "K"]
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// The width in pixels
    #[arg(long, value_name = "PX", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(200..=20_000))]
    pub width: u32,
    /// The height in pixels (0: the default) [default: 100 + 190 per algorithm]
    #[arg(long, value_name = "PX", value_parser = height)]
    pub height: Option<u32>,
}

/// 0 (the default height) or 100 to 20000 pixels.
fn height(s: &str) -> Result<u32, String> {
    match s.parse::<u32>().map_err(|e| e.to_string())? {
        px @ (0 | 100..=20_000) => Ok(px),
        px => Err(format!("{px} is not 0 nor in 100..=20000")),
    }
}

const PLOT_HELP: &str = "\
Each panel shows one algorithm on the key drawn: the requests arriving in each time
bin as stacked bars (admitted, admitted but held by the leaky bucket, denied; left
axis), dots where a held request goes on, and the remaining capacity as a step line
(right axis). Requests of other keys are left out.

Examples:
  $ ratelimit-sim plot --generator \"window-edge --limit 10 --period 1s --duration 4s\" -o edge.svg
  $ ratelimit-sim plot --algo \"gcra --limit 10 --period 1s; fixed-window --limit 10 --period 1s\" < trace.txt > chart.svg";

/// `ratelimit-sim plot [OPTIONS]`: writes the SVG to `--svg FILE` or to
/// `output`.
pub fn run_plot(
    args: &PlotArgs,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), SimError> {
    let setup = args.setup.setup(input)?;
    let chart = chart_data(&setup.specs, &setup.events, args.key.as_deref(), args.bin)?;
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| format!("ratelimit-sim: key {:?}", chart.key));
    let svg = render_svg(&chart, &title, args.width, args.height.unwrap_or(0))?;
    match &args.svg {
        Some(path) if path != "-" => {
            std::fs::write(path, svg).map_err(|e| SimError(format!("cannot write {path:?}: {e}")))
        }
        _ => output
            .write_all(svg.as_bytes())
            .and_then(|()| output.flush())
            .map_err(|e| SimError(format!("i/o error: {e}"))),
    }
}
