//! The SVG chart of a what-if run: limited requests over time, one panel
//! per limit, in `plot`'s style (its colors and font).

use super::tally::{LimitTally, Tally};
use crate::plot::{DENIED, FONT};
use crate::SimError;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Round bin widths, in seconds.
const BINS: [u64; 12] = [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 86_400];

/// The bin width near 1/60 of `span` seconds.
fn bin_width(span: u64) -> u64 {
    let want = span.div_ceil(60).max(1);
    BINS.iter().copied().find(|b| *b >= want).unwrap_or(86_400)
}

/// Each limit's limited requests per bin, from `start` (s since the epoch).
fn bins(t: &Tally, start: u64, width: u64, n: usize) -> Vec<Vec<u64>> {
    t.limits
        .iter()
        .map(|l| {
            let mut b = vec![0u64; n];
            for (&s, &count) in &l.seconds {
                let i = ((s.saturating_sub(start)) / width) as usize;
                b[i.min(n - 1)] += count;
            }
            b
        })
        .collect()
}

/// The chart as an SVG document, `width` pixels wide.
pub fn render(t: &Tally, title: &str, width: u32) -> Result<String, SimError> {
    let mut svg = String::new();
    draw(t, title, width, &mut svg).map_err(|e| SimError(format!("cannot draw the chart: {e}")))?;
    Ok(svg)
}

/// A drawing error.
type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(t: &Tally, title: &str, width: u32, svg: &mut String) -> DrawResult {
    let (start, end) = t
        .span
        .map_or((0, 1), |(a, b)| (a / 1_000_000_000, b / 1_000_000_000));
    let bin = bin_width(end - start + 1);
    let n = ((end - start) / bin + 1) as usize;
    let data = bins(t, start, bin, n);
    // Limits that saw no request of the log get no panel.
    let shown: Vec<usize> = (0..t.limits.len())
        .filter(|&i| t.limits[i].counts.seen > 0)
        .collect();
    let panels = shown.len().max(1);
    let height = 90 + 170 * panels as u32;
    let root = SVGBackend::with_string(svg, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(60);
    draw_header(&header, t, title, bin)?;
    let x_end = (n as u64 * bin) as f64 / 60.0;
    let areas = body.split_evenly((panels, 1));
    for (k, (area, &i)) in areas.iter().zip(&shown).enumerate() {
        let last = k + 1 == shown.len();
        draw_panel(area, &t.limits[i], &data[i], (bin, x_end), last)?;
    }
    root.present()?;
    Ok(())
}

/// The title, and a subtitle naming the bins and the limits without a
/// panel.
fn draw_header(
    header: &DrawingArea<SVGBackend<'_>, Shift>,
    t: &Tally,
    title: &str,
    bin: u64,
) -> DrawResult {
    header.draw(&Text::new(
        title.to_owned(),
        (20, 10),
        (FONT, 21).into_font().style(FontStyle::Bold),
    ))?;
    let unseen: Vec<&str> = t
        .limits
        .iter()
        .filter(|l| l.counts.seen == 0)
        .map(|l| l.name.as_str())
        .collect();
    let mut subtitle =
        format!("limited requests per {bin} s; time in minutes from the log's first line");
    if !unseen.is_empty() {
        subtitle.push_str(&format!("; no request for {}", unseen.join(", ")));
    }
    header.draw(&Text::new(subtitle, (20, 36), (FONT, 15)))?;
    Ok(())
}

/// One limit's panel: its limited requests per bin of `bin` seconds, on
/// a time axis ending at `x_end` minutes (named under the `last` panel).
fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    l: &LimitTally,
    data: &[u64],
    (bin, x_end): (u64, f64),
    last: bool,
) -> DrawResult {
    let top = (data.iter().copied().max().unwrap_or(0) as f64 * 1.15)
        .ceil()
        .max(2.0);
    let caption = format!(
        "{} ({})   seen {}, limited {}, of which served in the log {}",
        l.name, l.mode, l.counts.seen, l.counts.limited, l.counts.limited_succeeded
    );
    let mut c = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin_left(10)
        .margin_right(20)
        .x_label_area_size(if last { 40 } else { 22 })
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_end, 0f64..top)?;
    let mut mesh = c.configure_mesh();
    mesh.disable_x_mesh()
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(WHITE)
        .y_label_formatter(&|y| match y.fract() {
            0.0 => format!("{y:.0}"),
            _ => String::new(),
        })
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_labels(5)
        .y_desc("limited")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15));
    if last {
        mesh.x_desc("minutes");
    }
    mesh.draw()?;
    let w = bin as f64 / 60.0;
    c.draw_series(
        data.iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(k, &n)| {
                let x0 = k as f64 * w + w * 0.1;
                Rectangle::new([(x0, 0.0), (x0 + w * 0.8, n as f64)], DENIED.filled())
            }),
    )?;
    Ok(())
}
