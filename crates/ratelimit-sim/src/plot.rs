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

use crate::setup::SetupArgs;
use crate::values::positive_duration;
use crate::{AlgorithmSpec, Event, Replayer, SimError};
use clap::Parser;
use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use ratelimit_core::Decision;
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

/// What one panel draws.
///
/// ```
/// use ratelimit_sim::{chart_data, parse_generator, AlgorithmSpec, Chart};
///
/// let specs = [AlgorithmSpec::parse("gcra 10/1s").unwrap()];
/// let words = ["steady", "--rate", "20", "--period", "1s", "--duration", "2s"];
/// let events = parse_generator(&words.map(String::from)).unwrap().events();
/// let chart: Chart = chart_data(&specs, &events, None, None).unwrap();
/// let panel = &chart.panels[0];
/// assert_eq!(panel.admitted + panel.denied, 40);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The algorithm as written.
    pub label: String,
    /// Per bin: requests admitted at once, admitted but held, denied.
    pub bins: Vec<[u64; 3]>,
    /// `(time in ms, remaining)`, in time order.
    pub remaining: Vec<(u64, u64)>,
    /// When each held request goes on, in ms (fractional).
    pub departures: Vec<f64>,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied.
    pub denied: u64,
}

/// Everything the chart draws.
///
/// ```
/// use ratelimit_sim::{chart_data, parse_generator, AlgorithmSpec, Chart};
///
/// let specs = [AlgorithmSpec::parse("gcra 10/1s").unwrap()];
/// let words = ["steady", "--rate", "20", "--period", "1s", "--duration", "2s"];
/// let events = parse_generator(&words.map(String::from)).unwrap().events();
/// let chart: Chart = chart_data(&specs, &events, None, None).unwrap();
/// let panel = &chart.panels[0];
/// assert_eq!(panel.admitted + panel.denied, 40);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The key drawn.
    pub key: String,
    /// The width of a bin in ms.
    pub bin_ms: u64,
    /// The end of the time axis in ms (the start is 0).
    pub end_ms: u64,
    /// One panel per algorithm.
    pub panels: Vec<Panel>,
}

/// A round bin width near `span / 100`: 1, 2 or 5 times a power of ten ms.
fn auto_bin(span_ms: u64) -> u64 {
    let target = (span_ms / 100).max(1);
    let mut unit = 1u64;
    loop {
        for m in [1, 2, 5] {
            match unit.checked_mul(m) {
                Some(bin) if bin >= target => return bin,
                Some(_) => {}
                None => return u64::MAX,
            }
        }
        unit = unit.saturating_mul(10);
    }
}

/// Round tick values of an axis `[0, max]`: multiples of a step of 1, 2 or
/// 5 times a power of ten, labelled with the step's decimals (`0.6`, not
/// `0.6000000000000001`).
#[derive(Debug, Clone, PartialEq)]
struct Ticks {
    values: Vec<f64>,
    decimals: usize,
}

impl Ticks {
    /// At most about `most` intervals over `[0, max]`.
    fn new(max: f64, most: usize) -> Self {
        Self::with_step(max, nice_step(max / most.max(1) as f64))
    }

    /// As [`new`](Self::new), on whole numbers only (counts).
    fn integers(max: f64, most: usize) -> Self {
        Self::with_step(max, nice_step(max / most.max(1) as f64).max(1.0))
    }

    fn with_step(max: f64, step: f64) -> Self {
        // A step of 10^-k needs k decimals; at least 1 it needs none.
        let decimals = (-step.log10().floor()).clamp(0.0, 17.0) as usize;
        let count = if max.is_finite() && max > 0.0 {
            (max / step * (1.0 + 1e-9)).floor() as u64
        } else {
            0
        };
        let values = (0..=count.min(1_000)).map(|i| i as f64 * step).collect();
        Self { values, decimals }
    }

    fn label(&self, value: f64) -> String {
        format!("{value:.*}", self.decimals)
    }

    /// The axis `[0, max]` with these ticks.
    fn axis(&self, max: f64) -> RoundAxis {
        RoundAxis {
            inner: (0f64..max).into(),
            ticks: self.values.clone(),
        }
    }
}

/// A linear `f64` axis whose ticks are given ([`Ticks`]), not chosen by
/// plotters (whose float steps print as `0.6000000000000001`).
struct RoundAxis {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for RoundAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: the light mesh lines are not drawn.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The smallest of 1, 2 or 5 times a power of ten that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// The most bars a panel may have.
const MAX_BINS: u64 = 20_000;

/// Runs the events of `key` (default: the first key) through each
/// algorithm and gathers what the chart draws.
pub fn chart_data(
    specs: &[AlgorithmSpec],
    events: &[Event],
    key: Option<&str>,
    bin: Option<Duration>,
) -> Result<Chart, SimError> {
    let key = match key {
        Some(k) => k.to_owned(),
        None => events
            .first()
            .map(|e| e.key.clone())
            .ok_or_else(|| SimError("the trace is empty: nothing to plot".to_owned()))?,
    };
    let events: Vec<&Event> = events.iter().filter(|e| e.key == key).collect();
    let last = events
        .last()
        .ok_or_else(|| SimError(format!("no request of key {key:?} to plot")))?
        .t_ms;
    if last > u64::MAX / 1_000_000 {
        return Err(SimError(format!("time {last} ms is too large")));
    }
    // The axis ends after the last request, or after the last held request
    // goes on, whichever is later.
    let mut span_ms = last + 1;
    for spec in specs {
        let mut replayer = Replayer::new(spec.algorithm);
        for event in &events {
            let d = replayer.decide(event)?;
            if d.allowed {
                let hold_ms = u64::try_from(d.hold().as_millis()).unwrap_or(u64::MAX);
                span_ms = span_ms.max(event.t_ms.saturating_add(hold_ms).saturating_add(1));
            }
        }
    }
    let bin_ms = match bin {
        Some(b) => u64::try_from(b.as_millis())
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| SimError("option --bin must be at least 1ms".to_owned()))?,
        None => auto_bin(span_ms),
    };
    if span_ms.div_ceil(bin_ms) > MAX_BINS {
        return Err(SimError(format!(
            "more than {MAX_BINS} bars of {bin_ms} ms: choose a wider --bin"
        )));
    }
    let end_ms = span_ms.div_ceil(bin_ms) * bin_ms;
    let panels = specs
        .iter()
        .map(|spec| run_panel(spec, &events, bin_ms, end_ms))
        .collect::<Result<_, _>>()?;
    Ok(Chart {
        key,
        bin_ms,
        end_ms,
        panels,
    })
}

fn run_panel(
    spec: &AlgorithmSpec,
    events: &[&Event],
    bin_ms: u64,
    end_ms: u64,
) -> Result<Panel, SimError> {
    let mut replayer = Replayer::new(spec.algorithm);
    let nbins = usize::try_from(end_ms / bin_ms).unwrap_or(usize::MAX);
    let mut panel = Panel {
        label: spec.label.clone(),
        bins: vec![[0; 3]; nbins],
        remaining: Vec::new(),
        departures: Vec::new(),
        admitted: 0,
        denied: 0,
    };
    let step = (bin_ms / 5).max(1);
    let key = events.first().map_or("", |e| e.key.as_str());
    let mut peeks = Peeks { key, step, next: 0 };
    for event in events {
        peeks.sample(&mut replayer, &mut panel, event.t_ms)?;
        let d = replayer.decide(event)?;
        panel.count(event.t_ms, &d, bin_ms);
    }
    // Keep sampling after the last request, to the end of the axis.
    peeks.sample(&mut replayer, &mut panel, end_ms)?;
    Ok(panel)
}

/// The cost-0 peeks between requests: one every `step` ms, from 0.
struct Peeks<'a> {
    key: &'a str,
    step: u64,
    next: u64,
}

impl Peeks<'_> {
    /// Peeks at every step up to `t_ms` (included) and records what
    /// remains.
    fn sample(
        &mut self,
        replayer: &mut Replayer,
        panel: &mut Panel,
        t_ms: u64,
    ) -> Result<(), SimError> {
        while self.next <= t_ms {
            let d = replayer.decide(&Event {
                t_ms: self.next,
                key: self.key.to_owned(),
                cost: 0,
            })?;
            panel.remaining.push((self.next, d.remaining));
            self.next += self.step;
        }
        Ok(())
    }
}

impl Panel {
    /// Counts the decision `d` of a request at `t_ms`: its bar, what
    /// remains, and when a held request goes on.
    fn count(&mut self, t_ms: u64, d: &Decision, bin_ms: u64) {
        self.remaining.push((t_ms, d.remaining));
        let slot = usize::try_from(t_ms / bin_ms).unwrap_or(usize::MAX);
        let category = match (d.allowed, d.hold().is_zero()) {
            (true, true) => 0,
            (true, false) => 1,
            (false, _) => 2,
        };
        if let Some(bin) = self.bins.get_mut(slot) {
            bin[category] += 1;
        }
        if d.allowed {
            self.admitted += 1;
            if !d.hold().is_zero() {
                self.departures
                    .push(t_ms as f64 + d.hold().as_nanos() as f64 / 1e6);
            }
        } else {
            self.denied += 1;
        }
    }
}

const ADMITTED: RGBColor = RGBColor(44, 160, 44);
const HELD: RGBColor = RGBColor(255, 127, 14);
pub(crate) const DENIED: RGBColor = RGBColor(214, 39, 40);
const REMAINING: RGBColor = RGBColor(31, 119, 180);
pub(crate) const FONT: &str = "sans-serif";

/// Draws the chart as an SVG document of `width` x `height` pixels
/// (`height` 0: 100 + 190 per panel).
pub fn render_svg(chart: &Chart, title: &str, width: u32, height: u32) -> Result<String, SimError> {
    let height = if height == 0 {
        100 + 190 * chart.panels.len() as u32
    } else {
        height
    };
    let mut svg = String::new();
    draw(chart, title, (width, height), &mut svg)
        .map_err(|e| SimError(format!("cannot draw the chart: {e}")))?;
    Ok(svg)
}

/// A drawing error.
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A panel's chart: time and bars on the left axis, time and remaining
/// capacity on the right one.
type PanelChart<'a, 'b> = DualCoordChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<RoundAxis, RoundAxis>,
    Cartesian2d<RangedCoordf64, RoundAxis>,
>;

/// What every panel shares: the time axis and the bars' scale.
struct Scales {
    end_s: f64,
    bin_s: f64,
    bar_max: f64,
    x_ticks: Ticks,
    y_desc: String,
}

impl Scales {
    fn new(chart: &Chart) -> Self {
        let end_s = chart.end_ms as f64 / 1000.0;
        let bar_max = chart
            .panels
            .iter()
            .flat_map(|p| p.bins.iter().map(|b| b.iter().sum::<u64>()))
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        Self {
            end_s,
            bin_s: chart.bin_ms as f64 / 1000.0,
            bar_max,
            x_ticks: Ticks::new(end_s, 10),
            y_desc: format!("requests per {} ms", chart.bin_ms),
        }
    }
}

fn draw(chart: &Chart, title: &str, size: (u32, u32), svg: &mut String) -> DrawResult {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(70);
    header.draw(&Text::new(
        title.to_owned(),
        (20, 10),
        (FONT, 21).into_font().style(FontStyle::Bold),
    ))?;
    draw_legend(&header)?;
    let scales = Scales::new(chart);
    let areas = body.split_evenly((chart.panels.len().max(1), 1));
    for (i, (area, panel)) in areas.iter().zip(&chart.panels).enumerate() {
        let last = i + 1 == chart.panels.len();
        let mut c = panel_chart(area, panel, &scales, last)?;
        draw_bars(&mut c, panel, &scales)?;
        c.draw_secondary_series(std::iter::once(PathElement::new(
            steps(&panel.remaining),
            REMAINING.stroke_width(2),
        )))?;
    }
    root.present()?;
    Ok(())
}

/// The panel's caption: the algorithm and its counts.
fn caption(panel: &Panel) -> String {
    let held = panel.bins.iter().map(|b| b[1]).sum::<u64>();
    if held > 0 {
        format!(
            "{}   (admitted {}, of which held {}; denied {})",
            panel.label, panel.admitted, held, panel.denied
        )
    } else {
        format!(
            "{}   (admitted {}, denied {})",
            panel.label, panel.admitted, panel.denied
        )
    }
}

/// A panel's chart with its caption, mesh and both axes drawn (the time
/// axis named under the `last` panel only).
fn panel_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    panel: &Panel,
    scales: &Scales,
    last: bool,
) -> Result<PanelChart<'a, 'b>, Box<dyn std::error::Error>> {
    let (end_s, bar_max) = (scales.end_s, scales.bar_max);
    let remaining_max = panel
        .remaining
        .iter()
        .map(|&(_, r)| r)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut c = ChartBuilder::on(area)
        .caption(caption(panel), (FONT, 17))
        .margin_left(10)
        .margin_right(10)
        .margin_bottom(4)
        .x_label_area_size(if last { 40 } else { 22 })
        .y_label_area_size(60)
        .right_y_label_area_size(70)
        .build_cartesian_2d(
            scales.x_ticks.axis(end_s),
            Ticks::integers(bar_max * 1.15, 5).axis(bar_max * 1.15),
        )?
        .set_secondary_coord(
            0f64..end_s,
            Ticks::integers(remaining_max * 1.15, 5).axis(remaining_max * 1.15),
        );
    let x_label = |x: &f64| scales.x_ticks.label(*x);
    let mut mesh = c.configure_mesh();
    mesh.disable_x_mesh()
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(WHITE)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_label_formatter(&x_label)
        .y_desc(&scales.y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15));
    if last {
        mesh.x_desc("time (s)");
    }
    mesh.draw()?;
    c.configure_secondary_axes()
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc("remaining capacity")
        .label_style((FONT, 14).into_font().color(&REMAINING))
        .axis_desc_style((FONT, 15).into_font().color(&REMAINING))
        .draw()?;
    Ok(c)
}

/// The stacked bars of each bin, and a dot where each held request goes
/// on.
fn draw_bars(c: &mut PanelChart<'_, '_>, panel: &Panel, scales: &Scales) -> DrawResult {
    let bin_s = scales.bin_s;
    let gap = bin_s * 0.12;
    c.draw_series(panel.bins.iter().enumerate().flat_map(|(k, b)| {
        let x0 = k as f64 * bin_s + gap;
        let x1 = (k + 1) as f64 * bin_s - gap;
        let mut y = 0.0;
        [ADMITTED, HELD, DENIED]
            .into_iter()
            .zip(b.iter())
            .filter(|&(_, &n)| n > 0)
            .map(move |(color, &n)| {
                let rect = Rectangle::new([(x0, y), (x1, y + n as f64)], color.filled());
                y += n as f64;
                rect
            })
            .collect::<Vec<_>>()
    }))?;
    // Above the tallest bar, in the headroom of the axis.
    let dot_y = scales.bar_max * 1.07;
    c.draw_series(
        panel
            .departures
            .iter()
            .map(|&d| Circle::new((d / 1000.0, dot_y), 2, HELD.filled())),
    )?;
    Ok(())
}

/// The remaining capacity as a step line: a corner at each change, and
/// the last sample.
fn steps(remaining: &[(u64, u64)]) -> Vec<(f64, f64)> {
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for (i, &(t, r)) in remaining.iter().enumerate() {
        let (x, y) = (t as f64 / 1000.0, r as f64);
        match steps.last() {
            Some(&(_, prev)) if prev == y && i + 1 < remaining.len() => {}
            Some(&(_, prev)) => {
                steps.push((x, prev));
                steps.push((x, y));
            }
            None => steps.push((x, y)),
        }
    }
    steps
}

fn draw_legend(area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
    let font = (FONT, 16).into_font();
    let y = 44;
    let mut x = 20;
    let boxes = [
        (ADMITTED, "admitted"),
        (HELD, "admitted, held in the queue (leaky bucket)"),
        (DENIED, "denied"),
    ];
    for (color, text) in boxes {
        area.draw(&Rectangle::new([(x, y), (x + 14, y + 14)], color.filled()))?;
        area.draw(&Text::new(text, (x + 20, y), font.clone()))?;
        x += 20 + 7 * text.len() as i32 + 28;
    }
    area.draw(&Circle::new((x + 7, y + 7), 3, HELD.filled()))?;
    let text = "held request goes on";
    area.draw(&Text::new(text, (x + 20, y), font.clone()))?;
    x += 20 + 7 * text.len() as i32 + 28;
    area.draw(&PathElement::new(
        vec![(x, y + 7), (x + 24, y + 7)],
        REMAINING.stroke_width(3),
    ))?;
    let text = "remaining capacity (right axis)";
    area.draw(&Text::new(text, (x + 30, y), font))?;
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::decide_all;
    use crate::parse_generator;
    use crate::setup::spec;

    fn events(generator: &str) -> Vec<Event> {
        let words: Vec<String> = generator.split_whitespace().map(String::from).collect();
        parse_generator(&words).unwrap().events()
    }

    #[test]
    fn ticks_are_round_steps() {
        let t = Ticks::new(1.0, 10);
        assert_eq!(t.decimals, 1);
        let labels: Vec<String> = t.values.iter().map(|v| t.label(*v)).collect();
        assert_eq!(
            labels,
            ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
        );
        for (max, most, step, decimals) in [
            (8.0, 10, 1.0, 0),
            (3.0, 10, 0.5, 1),
            (13.0, 10, 2.0, 0),
            (120.0, 10, 20.0, 0),
            (0.07, 10, 0.01, 2),
            (0.3, 10, 0.05, 2),
        ] {
            let t = Ticks::new(max, most);
            assert_eq!((t.values[1], t.decimals), (step, decimals), "{max}");
            assert!(t.values.len() <= most + 1, "{max}");
            assert!(*t.values.last().unwrap() <= max * (1.0 + 1e-9), "{max}");
        }
        // Counts: whole steps only.
        let t = Ticks::integers(1.15, 5);
        assert_eq!((t.values.as_slice(), t.decimals), (&[0.0, 1.0][..], 0));
        assert_eq!(Ticks::integers(11.5, 5).values, [0.0, 5.0, 10.0]);
        // Degenerate axes get one tick.
        assert_eq!(Ticks::new(0.0, 10).values, [0.0]);
        assert_eq!(Ticks::new(f64::NAN, 10).values, [0.0]);
    }

    /// Every number the chart prints is round: no `0.6000000000000001`.
    #[test]
    fn axis_labels_have_no_float_tails() {
        for (generator, algo) in [
            (
                "steady --rate 5 --period 1s --duration 1s",
                "gcra --limit 3 --period 1s",
            ),
            (
                "steady --rate 7 --period 1s --duration 700ms",
                "gcra --limit 3 --period 1s",
            ),
            (
                "window-edge --limit 10 --period 1s --duration 3s",
                "fixed-window --limit 10 --period 1s",
            ),
            (
                "bursty --size 30 --every 1s --duration 13s",
                "leaky-bucket --limit 3 --period 1s --queue 2",
            ),
        ] {
            let chart = chart_data(&[spec(algo)], &events(generator), None, None).unwrap();
            let svg = render_svg(&chart, "t", 1000, 0).unwrap();
            let mut labels = Vec::new();
            for text in svg.split("<text").skip(1) {
                let inner = text.split_once('>').unwrap().1;
                let label = inner.split_once("</text>").unwrap().0.trim();
                if label.parse::<f64>().is_ok() {
                    labels.push(label.to_owned());
                }
            }
            assert!(labels.len() > 8, "{generator}: {labels:?}");
            for label in &labels {
                let decimals = label.split_once('.').map_or(0, |(_, d)| d.len());
                assert!(decimals <= 2, "{generator}: label {label:?} in {labels:?}");
            }
            if generator.ends_with("--duration 1s") {
                // 0.6 s is on the time axis, printed as such.
                assert!(labels.iter().any(|l| l == "0.6"), "{labels:?}");
            }
        }
    }

    #[test]
    fn a_long_hold_widens_the_axis() {
        // Queue 5 at 1 per 10s: the sixth request waits 50s.
        let evs: Vec<Event> = (0..6)
            .map(|i| Event {
                t_ms: i,
                key: "k".to_owned(),
                cost: 1,
            })
            .collect();
        let chart = chart_data(
            &[spec("leaky-bucket --limit 1 --period 10s --queue 5")],
            &evs,
            None,
            None,
        )
        .unwrap();
        assert_eq!(chart.panels[0].departures.last(), Some(&50_000.0));
        assert_eq!((chart.bin_ms, chart.end_ms), (500, 50_500));
        assert!(chart.panels[0].remaining.last().unwrap().0 >= 50_000);
    }

    #[test]
    fn bins_are_round() {
        assert_eq!(auto_bin(u64::MAX), 200_000_000_000_000_000);
        assert_eq!(auto_bin(1), 1);
        assert_eq!(auto_bin(4000), 50);
        assert_eq!(auto_bin(10_000), 100);
        assert_eq!(auto_bin(60_000), 1000);
    }

    #[test]
    fn peeks_change_no_decision() {
        let evs = events("poisson --rate 25 --period 1s --duration 20s --seed 5");
        for s in crate::all_algorithms(10, "1s").unwrap() {
            let chart = chart_data(std::slice::from_ref(&s), &evs, None, None).unwrap();
            let p = &chart.panels[0];
            let decided = decide_all(s.algorithm, &evs).unwrap();
            let admitted = decided.iter().filter(|d| d.allowed).count() as u64;
            assert_eq!(
                (p.admitted, p.denied),
                (admitted, evs.len() as u64 - admitted)
            );
            let held = decided.iter().filter(|d| !d.hold().is_zero()).count();
            assert_eq!(p.departures.len(), held, "{}", s.label);
            let binned: u64 = p.bins.iter().flatten().sum();
            assert_eq!(binned, evs.len() as u64);
        }
    }

    #[test]
    fn window_edge_chart_numbers() {
        let evs = events("window-edge --limit 10 --period 1s --duration 4s");
        let specs = [
            spec("fixed-window --limit 10 --period 1s"),
            spec("leaky-bucket --limit 10 --period 1s --queue 9"),
        ];
        let chart = chart_data(&specs, &evs, None, None).unwrap();
        assert_eq!((chart.key.as_str(), chart.bin_ms), ("client", 50));
        let fixed = &chart.panels[0];
        // Bins of 50ms: 900..940, 950..990, 1000..1040, 1050..1090.
        assert_eq!(&fixed.bins[18..22], &[[5, 0, 0]; 4]);
        // Full at 0, empty just before the boundary, full again at 1000,
        // empty again at 1090.
        assert_eq!(fixed.remaining.first(), Some(&(0, 10)));
        assert!(fixed.remaining.contains(&(990, 0)));
        assert!(fixed.remaining.contains(&(1000, 9)));
        assert!(fixed.remaining.contains(&(1090, 0)));
        let leaky = &chart.panels[1];
        assert_eq!(leaky.bins[18], [1, 4, 0]);
        assert_eq!(leaky.bins[20], [0, 1, 4]);
        // Held requests go on 100ms apart: 1000, 1100, ..., 1900.
        assert_eq!(
            leaky.departures[..10],
            [1000.0, 1100.0, 1200.0, 1300.0, 1400.0, 1500.0, 1600.0, 1700.0, 1800.0, 1900.0]
        );
        assert!(chart.end_ms >= 3100);
    }

    #[test]
    fn svg_has_a_panel_per_algorithm_and_a_legend() {
        let evs = events("window-edge --limit 10 --period 1s --duration 4s");
        let specs = crate::all_algorithms(10, "1s").unwrap();
        let chart = chart_data(&specs, &evs, None, None).unwrap();
        let svg = render_svg(&chart, "edge", 1000, 0).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("height=\"1240\""));
        for s in &specs {
            assert!(svg.contains(&s.label), "{}", s.label);
        }
        for text in [
            "admitted",
            "denied",
            "remaining capacity (right axis)",
            "time (s)",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    /// `plot` with `list`, parsed as the command line is.
    fn args(list: &[&str]) -> Result<PlotArgs, SimError> {
        PlotArgs::try_parse_from(std::iter::once(&"plot").chain(list))
            .map_err(|e| crate::values::cli_error(&e, "subcommand"))
    }

    #[test]
    fn run_plot_writes_to_output_or_file() {
        let mut out = Vec::new();
        run_plot(
            &args(&[
                "--algo",
                "gcra --limit 2 --period 1s",
                "--title",
                "T",
                "--height",
                "0",
            ])
            .unwrap(),
            "0 a\n10 a\n20 a\n1500 a\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(">\nT\n</text>"));
        assert!(svg.contains("gcra --limit 2 --period 1s   (admitted 3, denied 1)"));

        let path = std::env::temp_dir().join(format!("ratelimit-sim-{}.svg", std::process::id()));
        let mut out = Vec::new();
        run_plot(
            &args(&[
                "--generator",
                "steady --rate 5 --period 1s --duration 2s",
                "-o",
                path.to_str().unwrap(),
            ])
            .unwrap(),
            "".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert!(out.is_empty());
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // Without --algo: the six algorithms at 10 per 1s.
        assert_eq!(svg.matches("   (admitted ").count(), 6);
    }

    #[test]
    fn run_plot_rejects_bad_options() {
        for bad in [
            &["--svg"][..],
            &["--width", "10"],
            &["--height", "99"],
            &["--bin", "0ms"],
            &["--algo", "gcra"],
            &["--generator", "steady --rate 1 --period 1s", "--key", "x"],
            &["--color", "red"],
        ] {
            let err = args(bad)
                .and_then(|a| run_plot(&a, "0 a\n".as_bytes(), Vec::new()))
                .unwrap_err();
            assert!(!err.0.contains('\n'), "{bad:?}: {err}");
        }
    }

    #[test]
    fn plot_rejects_empty_and_unknown_keys() {
        let s = [spec("gcra --limit 1 --period 1s")];
        assert!(chart_data(&s, &[], None, None).is_err());
        let evs = events("steady --rate 1 --period 1s --duration 2s");
        assert!(chart_data(&s, &evs, Some("nobody"), None).is_err());
        assert!(chart_data(&s, &evs, None, Some(Duration::ZERO)).is_err());
        let far = [Event {
            t_ms: u64::MAX,
            key: "a".to_owned(),
            cost: 1,
        }];
        assert!(chart_data(&s, &far, None, None).is_err());
        assert!(chart_data(&s, &far, None, Some(Duration::from_millis(1))).is_err());
    }
}
