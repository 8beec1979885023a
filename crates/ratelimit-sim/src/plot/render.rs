//! Drawing: the chart's numbers to an SVG with plotters.

use super::axis::{RoundAxis, Ticks};
use super::data::{Chart, Panel};
use crate::SimError;
use plotters::chart::DualCoordChartContext;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

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
