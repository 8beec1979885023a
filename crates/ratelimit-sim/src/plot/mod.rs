//! `ratelimit-sim plot`: a trace through several algorithms, drawn as an
//! SVG chart with one panel per algorithm.
//!
//! Each panel shows, for one key (`--key`, default the trace's first key):
//!
//! - bars: the requests arriving in each time bin (`--bin`), stacked as
//!   admitted (green), admitted but held (orange: the leaky bucket's queue)
//!   and denied (red), on the left axis;
//! - small orange dots, above the bars, where a held request goes on
//!   (`t + hold`): the leaky bucket's steady output;
//! - a blue step line: the remaining capacity over time (the `remaining`
//!   the algorithm reports, sampled after each request and, between
//!   requests, by cost-0 peeks five times per bin), on the right axis.
//!
//! The requests of other keys are left out (keys are independent, so they
//! would change nothing).

mod args;
mod axis;
mod data;
mod render;
#[cfg(test)]
mod tests;

pub use args::{run_plot, PlotArgs};
pub use data::{chart_data, Chart, Panel};
pub use render::render_svg;
pub(crate) use render::{DENIED, FONT};
