//! The plot's tests: bins, peeks and the SVG.

use super::axis::Ticks;
use super::data::auto_bin;
use super::*;
use crate::compare::decide_all;
use crate::parse_generator;
use crate::setup::spec;
use crate::{Event, SimError};
use clap::Parser;
use std::time::Duration;

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
