//! `ratelimit-sim compare`: the same trace through several algorithms, one
//! table row each.
//!
//! Columns:
//!
//! - `admitted`, `denied`: requests (not cost) admitted and denied; `held`:
//!   admitted requests held before going on (the leaky bucket only).
//! - `max in P`: the largest admitted cost of one key in any interval of
//!   length `P` (the row's own period, or `--interval`). An interval of
//!   length `P` is a half-open `[s, s + P)` for any real start `s`, so a
//!   request at `s + P` is outside it; each admitted request counts at the
//!   time it goes on, `t + hold` (its arrival `t`, except for the leaky
//!   bucket). The maximum over all real `s` is reached with `s` at one of
//!   those times, so it is computed exactly by a sliding window over them.
//!   A fixed window of `L per P` reaches `2L` here (the edge burst); the
//!   sliding log never exceeds `L`.
//! - `differs from sliding-log`: the share of requests the exact sliding
//!   log would have decided otherwise, given the same history. For each
//!   request at `t` of cost `n`, `used` is the cost this algorithm admitted
//!   for the key in `(t - P, t]` (at arrival times), and the log admits iff
//!   `n = 0` or `used + n <= L` (the row's own `L` and `P`; for the token
//!   bucket `R` and `P`). `+` counts requests admitted that the log would
//!   deny, `-` requests denied that it would admit. For `sliding-window`
//!   this is the error of the two-window approximation, decision by
//!   decision; for `sliding-log` it is 0.

use crate::setup::SetupArgs;
use crate::values::positive_duration;
use crate::{AlgorithmSpec, Event, Replayer, SimError};
use clap::Parser;
use ratelimit_core::{AnyAlgorithm, Decision};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, Write};
use std::time::Duration;

/// `ratelimit-sim compare [OPTIONS] [< TRACE]`.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "compare", "--limit", "10", "--period", "1s"]).unwrap();
/// let Some(Command::Compare(args)) = cli.command else { panic!() };
/// assert_eq!(args.setup.limit, Some(10));
/// ```
#[derive(Debug, Clone, Parser)]
#[command(
    name = "compare",
    override_usage = "ratelimit-sim compare [OPTIONS] [< TRACE]",
    after_help = COMPARE_HELP
)]
pub struct CompareArgs {
    /// The algorithms and the traffic.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// The interval length of "max in P" for every row [default: each row's own period]
    #[arg(long, value_name = "D", value_parser = positive_duration, allow_hyphen_values = true)]
    pub interval: Option<Duration>,
}

const COMPARE_HELP: &str = "\
Columns, one row per algorithm:
  admitted, denied  requests (not cost) admitted and denied
  held              admitted requests held before going on (the leaky bucket's queue)
  max in P          the largest cost admitted for one key in any [s, s+P), P the row's
                    period or --interval; a held request counts when it goes on
  differs from sliding-log
                    the share of requests the exact sliding log at the same L per P would
                    decide otherwise, given the same admitted history (+ admitted where it
                    would deny, - denied where it would admit)

Example:
  $ ratelimit-sim compare --generator \"window-edge --limit 10 --period 1s\"";

/// One row of the table.
///
/// ```
/// use ratelimit_sim::{compare, parse_generator, AlgorithmSpec, Row};
///
/// let specs = [AlgorithmSpec::parse("sliding-log 10/1s").unwrap()];
/// let words = ["window-edge", "--limit", "10", "--period", "1s", "--duration", "4s"];
/// let events = parse_generator(&words.map(String::from)).unwrap().events();
/// let rows: Vec<Row> = compare(&specs, &events, None).unwrap();
/// assert_eq!(rows[0].max_in_interval, 10);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The algorithm as written.
    pub label: String,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied.
    pub denied: u64,
    /// Admitted requests held before going on (leaky bucket).
    pub held: u64,
    /// The interval length of [`max_in_interval`](Self::max_in_interval).
    pub interval: Duration,
    /// The largest admitted cost of one key in any `[s, s + interval)`.
    pub max_in_interval: u64,
    /// Requests admitted that the exact sliding log, given the same
    /// history, would deny.
    pub over: u64,
    /// Requests denied that the exact sliding log, given the same history,
    /// would admit.
    pub under: u64,
    /// All requests.
    pub total: u64,
}

/// Decides every event in order through a fresh store of `algorithm`.
pub fn decide_all(algorithm: AnyAlgorithm, events: &[Event]) -> Result<Vec<Decision>, SimError> {
    let mut replayer = Replayer::new(algorithm);
    events.iter().map(|e| replayer.decide(e)).collect()
}

/// The largest sum of costs within any half-open `[s, s + len)`, over
/// `(time, cost)` pairs sorted by time. `len` is in the times' unit.
///
/// ```
/// use ratelimit_sim::max_in_interval;
/// let admitted = [(0, 1), (500, 1), (999, 1), (1000, 1)];
/// assert_eq!(max_in_interval(&admitted, 1000), 3); // [0, 1000) misses 1000
/// assert_eq!(max_in_interval(&admitted, 1001), 4);
/// ```
pub fn max_in_interval(sorted: &[(u128, u64)], len: u128) -> u64 {
    let mut best = 0u64;
    let mut sum = 0u64;
    let mut end = 0usize;
    for (start, &(s, _)) in sorted.iter().enumerate() {
        while end < sorted.len() && sorted[end].0 < s + len {
            sum += sorted[end].1;
            end += 1;
        }
        best = best.max(sum);
        if end > start {
            sum -= sorted[start].1;
        } else {
            end = start + 1;
        }
    }
    best
}

/// Computes the table's rows; `interval` overrides each row's period.
pub fn compare(
    specs: &[AlgorithmSpec],
    events: &[Event],
    interval: Option<Duration>,
) -> Result<Vec<Row>, SimError> {
    specs
        .iter()
        .map(|spec| {
            let decisions = decide_all(spec.algorithm, events)?;
            let (limit, period) = spec.rate();
            let interval = interval.unwrap_or(period);
            let mut by_key: HashMap<&str, Vec<(u128, u64)>> = HashMap::new();
            let mut logs: HashMap<&str, ExactLog> = HashMap::new();
            let mut row = Row {
                label: spec.label.clone(),
                admitted: 0,
                denied: 0,
                held: 0,
                interval,
                max_in_interval: 0,
                over: 0,
                under: 0,
                total: events.len() as u64,
            };
            for (event, d) in events.iter().zip(&decisions) {
                let t = u128::from(event.t_ms) * 1_000_000;
                let log = logs.entry(event.key.as_str()).or_default();
                let exact = log.admits(t, event.cost, limit, period.as_nanos());
                row.over += u64::from(d.allowed && !exact);
                row.under += u64::from(!d.allowed && exact);
                if !d.allowed {
                    row.denied += 1;
                    continue;
                }
                log.push(t, event.cost);
                row.admitted += 1;
                row.held += u64::from(!d.hold().is_zero());
                by_key
                    .entry(event.key.as_str())
                    .or_default()
                    .push((t + d.hold().as_nanos(), event.cost));
            }
            for times in by_key.values_mut() {
                times.sort_by_key(|&(t, _)| t);
                let max = max_in_interval(times, interval.as_nanos());
                row.max_in_interval = row.max_in_interval.max(max);
            }
            Ok(row)
        })
        .collect()
}

/// The admitted `(time, cost)` of one key within the last period: the
/// exact sliding log, kept beside the algorithm under test.
#[derive(Debug, Default)]
struct ExactLog {
    entries: VecDeque<(u128, u64)>,
    used: u64,
}

impl ExactLog {
    /// Whether the sliding log would admit `cost` at `t`: entries at `s`
    /// count iff `s > t - period`.
    fn admits(&mut self, t: u128, cost: u64, limit: u64, period: u128) -> bool {
        while let Some(&(s, c)) = self.entries.front() {
            if s + period > t {
                break;
            }
            self.used -= c;
            self.entries.pop_front();
        }
        cost == 0 || self.used.saturating_add(cost) <= limit
    }

    fn push(&mut self, t: u128, cost: u64) {
        if cost > 0 {
            self.entries.push_back((t, cost));
            self.used += cost;
        }
    }
}

fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms % size == 0 && d.subsec_nanos() % 1_000_000 == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Formats the rows as an aligned text table, with a note on the columns.
pub fn format_table(rows: &[Row]) -> String {
    let headers = [
        "algorithm",
        "admitted",
        "denied",
        "held",
        "max in P",
        "P",
        "differs from sliding-log",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let share = if r.total == 0 {
                0.0
            } else {
                100.0 * (r.over + r.under) as f64 / r.total as f64
            };
            [
                r.label.clone(),
                r.admitted.to_string(),
                r.denied.to_string(),
                r.held.to_string(),
                r.max_in_interval.to_string(),
                format_duration(r.interval),
                format!("{share:.1}% (+{} -{})", r.over, r.under),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |row: [&str; 7]| {
        let mut s = format!("{:<w$}", row[0], w = widths[0]);
        for (c, w) in row.iter().zip(widths).skip(1) {
            s.push_str(&format!("  {c:>w$}"));
        }
        s.push('\n');
        s
    };
    let mut out = line(headers);
    for row in &cells {
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    out.push_str(
        "max in P: the largest cost admitted for one key in any [s, s+P), a request counting when it goes on (after its hold)\n\
         differs from sliding-log: requests the exact sliding log at the same L per P would decide otherwise, given the same admitted history\n\
         (+ admitted where it would deny, - denied where it would admit)\n",
    );
    out
}

/// `ratelimit-sim compare [OPTIONS]`: prints the table.
pub fn run_compare(
    args: &CompareArgs,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), SimError> {
    let setup = args.setup.setup(input)?;
    let rows = compare(&setup.specs, &setup.events, args.interval)?;
    output
        .write_all(format_table(&rows).as_bytes())
        .and_then(|()| output.flush())
        .map_err(|e| SimError(format!("i/o error: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_generator;
    use crate::setup::spec;

    fn events(generator: &str) -> Vec<Event> {
        let words: Vec<String> = generator.split_whitespace().map(String::from).collect();
        parse_generator(&words).unwrap().events()
    }

    fn row(algorithm: &str, generator: &str) -> Row {
        compare(&[spec(algorithm)], &events(generator), None)
            .unwrap()
            .remove(0)
    }

    /// (admitted, denied, held, max in P, over, under)
    fn numbers(r: &Row) -> (u64, u64, u64, u64, u64, u64) {
        assert_eq!(r.total, r.admitted + r.denied);
        (
            r.admitted,
            r.denied,
            r.held,
            r.max_in_interval,
            r.over,
            r.under,
        )
    }

    const EDGE: &str = "window-edge --limit 10 --period 1s --duration 10s";

    #[test]
    fn max_in_interval_is_half_open_and_exact() {
        assert_eq!(max_in_interval(&[], 10), 0);
        assert_eq!(max_in_interval(&[(5, 3)], 1), 3);
        let a = [(0, 1), (10, 2), (10, 1), (19, 1), (20, 5), (35, 1)];
        assert_eq!(max_in_interval(&a, 10), 6); // [19, 29): 1 + 5; [10, 20) has 4
        assert_eq!(max_in_interval(&a, 11), 9); // [10, 21)
        assert_eq!(max_in_interval(&a, 100), 11);
        assert_eq!(max_in_interval(&a, 1), 5); // [20, 21)
    }

    // The window-edge attack (10 per 1s, spread 100ms) fires 10 requests at
    // 900, 910, ..., 990 ms and 10 at 1000, ..., 1090 ms, then the same
    // around 3s, 5s, 7s and 9s: 100 requests in 5 attacks, 2s apart.

    #[test]
    fn window_edge_doubles_the_fixed_window() {
        // Every request fits its aligned window's quota: all 20 of an
        // attack land within [900, 1090], so 20 in one second.
        let r = row("fixed-window --limit 10 --period 1s", EDGE);
        assert_eq!(numbers(&r), (100, 0, 0, 20, 50, 0));
    }

    #[test]
    fn window_edge_sliding_log_holds_to_the_limit() {
        // 900..990 admitted; at 1000..1090 all ten still count (s > t - P).
        let r = row("sliding-log --limit 10 --period 1s", EDGE);
        assert_eq!(numbers(&r), (50, 50, 0, 10, 0, 0));
    }

    #[test]
    fn window_edge_sliding_window_matches_the_log_here() {
        // At 1000 + e (e < 100): prev 10 weighs 10 * (1000 - e) / 1000 > 9.
        let r = row("sliding-window --limit 10 --period 1s", EDGE);
        assert_eq!(numbers(&r), (50, 50, 0, 10, 0, 0));
    }

    #[test]
    fn window_edge_gcra_lets_one_more_through() {
        // T = 100ms. The k-th request at 900 + 10k makes TAT 1000 + 100k <=
        // t + 1000: all ten (TAT 1900). At 1000: new TAT 2000 <= 1000 + 1000,
        // admitted; at 1010..1090 the new TAT 2100 > t + 1000. By 2900 the
        // bucket is full again: 11 per attack, 11 within [900, 1900).
        let r = row("gcra --limit 10 --period 1s", EDGE);
        assert_eq!(numbers(&r), (55, 45, 0, 11, 5, 0));
        let tb = row("token-bucket --capacity 10 --refill 10 --period 1s", EDGE);
        assert_eq!(numbers(&tb), numbers(&r));
    }

    #[test]
    fn window_edge_leaky_bucket_smooths_the_output() {
        // Queue 9: the request at 900 + 10k leaves at 900 + 100k (k < 10),
        // and the one at 1000 at 1900 (held 900ms <= Q*T); then the queue is
        // full. Departures 100ms apart: at most 10 in any [s, s + 1s).
        let r = row("leaky-bucket --limit 10 --period 1s --queue 9", EDGE);
        assert_eq!(numbers(&r), (55, 45, 50, 10, 5, 0));
    }

    #[test]
    fn the_readme_table() {
        // The guide's compare table (docs/guide/algorithms.md): two window-edge attacks (1s, 3s), then
        // 20 per second from 4s to 8s (every 50ms, 80 requests).
        let mut evs = events("window-edge --limit 10 --period 1s --duration 4s");
        evs.extend(events(
            "steady --rate 20 --period 1s --start 4s --duration 4s",
        ));
        let rows = compare(&crate::all_algorithms(10, "1s").unwrap(), &evs, None).unwrap();
        let got: Vec<_> = rows.iter().map(numbers).collect();
        assert_eq!(
            got,
            [
                // Attacks: 11 + 11 (see window_edge_gcra_lets_one_more_through).
                // From 4000 (full): 4000 + 50k admitted while 100(k+1) <=
                // 1000 + 50k, k <= 18: 19 in [4000, 5000) (9 more than the
                // log: +9); then one per 100ms, 5000..7900: 30, of which
                // 5000..5800 over 10 in the last second (+9). +2 from the
                // attacks.
                (71, 49, 0, 19, 20, 0),
                (71, 49, 0, 19, 20, 0),
                // Same admissions, held: 68 of 71 wait; departures 100ms
                // apart.
                (71, 49, 68, 10, 20, 0),
                // Attacks 20 + 20; then the first 10 of each second: 40.
                (80, 40, 0, 20, 20, 0),
                // Attacks 10 + 10; then 4000..4450, 5000..5450, ...: 40.
                (60, 60, 0, 10, 0, 0),
                // Attacks 10 + 10 (prev 10 at the boundary); then per window
                // 10 (prev 0), 9 (prev 10: at e = 100, 200, ..., 900),
                // 9 and 9 (prev 9: e = 0, 150, 250, 350, 450, 600, 700,
                // 800, 900): 57. The log, on that history, would have
                // admitted 32 of the denied.
                (57, 63, 0, 10, 0, 32),
            ]
        );
    }

    #[test]
    fn gcra_peak_in_one_period_is_two_bursts_minus_one() {
        // Hammering every millisecond: the burst L at 0, then one per T:
        // 100, 200, ..., 900 in [0, 1000) and 1000 is outside. 2L - 1.
        let r = row(
            "gcra --limit 10 --period 1s",
            "steady --rate 1000 --period 1s --duration 5s",
        );
        // After the burst (0..9 ms, TAT 1000) one request per T: at 100,
        // 200, ..., 4900 ms.
        assert_eq!(r.max_in_interval, 19);
        assert_eq!(r.admitted, 10 + 49);
    }

    #[test]
    fn interval_override_and_costs() {
        let evs = events("window-edge --limit 5 --period 1s --duration 2s --cost 2");
        let rows = compare(
            &[spec("fixed-window --limit 10 --period 1s")],
            &evs,
            Some(Duration::from_secs(10)),
        )
        .unwrap();
        assert_eq!(rows[0].interval, Duration::from_secs(10));
        assert_eq!((rows[0].admitted, rows[0].max_in_interval), (10, 20));
    }

    #[test]
    fn keys_are_measured_apart() {
        let evs: Vec<Event> = (0..10)
            .map(|i| Event {
                t_ms: i,
                key: if i % 2 == 0 { "a" } else { "b" }.to_owned(),
                cost: 1,
            })
            .collect();
        let r = compare(&[spec("fixed-window --limit 3 --period 1s")], &evs, None).unwrap();
        assert_eq!((r[0].admitted, r[0].max_in_interval), (6, 3));
    }

    fn trace(times: &[u64]) -> Vec<Event> {
        times
            .iter()
            .map(|&t_ms| Event {
                t_ms,
                key: "k".to_owned(),
                cost: 1,
            })
            .collect()
    }

    #[test]
    fn sliding_window_errs_both_ways_against_the_log() {
        // L = 2, P = 1s. 900 and 950 fill the window [0, 1000).
        // At 1500: prev 2, e = 500: 2*500 + 1*1000 <= 2*1000, admitted; the
        //   log still holds 900 and 950 (> 500): it would deny (+1).
        // At 1960: 2*40 + 2*1000 > 2000, denied; the log holds only 1500
        //   (900, 950 <= 960): it would admit (-1).
        // Admitted 900, 950, 1500: 3 within [900, 1900), above L.
        let evs = trace(&[900, 950, 1500, 1960]);
        let r = compare(&[spec("sliding-window --limit 2 --period 1s")], &evs, None).unwrap();
        assert_eq!(numbers(&r[0]), (3, 1, 0, 3, 1, 1));
        let r = compare(&[spec("sliding-log --limit 2 --period 1s")], &evs, None).unwrap();
        // The log: 900, 950 admitted; 1500 denied; 1960 admitted.
        assert_eq!(numbers(&r[0]), (3, 1, 0, 2, 0, 0));
    }

    #[test]
    fn under_poisson_load_only_the_log_holds_the_limit() {
        let evs = events("poisson --rate 20 --period 1s --duration 60s --seed 1");
        let rows = compare(&crate::all_algorithms(10, "1s").unwrap(), &evs, None).unwrap();
        for r in &rows {
            assert_eq!(r.admitted + r.denied, evs.len() as u64);
            match r.label.split(' ').next().unwrap() {
                "sliding-log" => assert_eq!((r.max_in_interval, r.over, r.under), (10, 0, 0)),
                // Departures one per T: never more than L in a period.
                "leaky-bucket" => assert_eq!(r.max_in_interval, 10),
                // A burst of L and then one per T: at most 2L - 1.
                "gcra" | "token-bucket" => assert!((11..=19).contains(&r.max_in_interval)),
                "fixed-window" => assert!((11..=20).contains(&r.max_in_interval)),
                _ => assert!(r.max_in_interval > 10 && r.over + r.under > 0, "{r:?}"),
            }
        }
    }

    #[test]
    fn table_has_a_row_per_algorithm() {
        let rows = compare(
            &crate::all_algorithms(10, "1s").unwrap(),
            &events(EDGE),
            None,
        )
        .unwrap();
        let table = format_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("algorithm "));
        assert!(lines[0].ends_with("differs from sliding-log"));
        assert!(lines[4].starts_with("fixed-window --limit 10 --period 1s "));
        let cells = |line: &str| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words[words.len() - 8..].join(" ")
        };
        assert_eq!(cells(lines[4]), "100 0 0 20 1s 50.0% (+50 -0)");
        assert_eq!(cells(lines[5]), "50 50 0 10 1s 0.0% (+0 -0)");
        assert_eq!(cells(lines[3]), "55 45 50 10 1s 5.0% (+5 -0)");
        // Columns line up: every row is as wide as the header.
        assert!(lines[1..7].iter().all(|l| l.len() == lines[0].len()));
        assert_eq!(lines.len(), 1 + 6 + 3);
    }

    /// `compare` with `list`, parsed as the command line is.
    fn args(list: &[&str]) -> Result<CompareArgs, SimError> {
        CompareArgs::try_parse_from(std::iter::once(&"compare").chain(list))
            .map_err(|e| crate::values::cli_error(&e, "subcommand"))
    }

    #[test]
    fn run_compare_reads_generators_or_the_trace() {
        let mut out = Vec::new();
        run_compare(
            &args(&[
                "--algo",
                "fixed-window --limit 10 --period 1s",
                "--generator",
                "window-edge --limit 10 --period 1s --duration 2s",
                "--generator",
                "steady --rate 1 --period 1s --start 5s --duration 2s",
            ])
            .unwrap(),
            "".as_bytes(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row.split_whitespace().skip(5).collect::<Vec<_>>().join(" "),
            "22 0 0 20 1s 45.5% (+10 -0)"
        );

        let mut out = Vec::new();
        run_compare(
            &args(&[
                "--algo=sliding-log --limit 1 --period 1s",
                "--interval",
                "2s",
            ])
            .unwrap(),
            "0 a\n999 a\n1000 a\n1000 b 3\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row.split_whitespace().skip(5).collect::<Vec<_>>().join(" "),
            "2 2 0 2 2s 0.0% (+0 -0)"
        );
    }

    #[test]
    fn run_compare_rejects_bad_options() {
        for bad in [
            &["--interval", "0s"][..],
            &["--interval", "soon"],
            &["--algo", "nope --limit 1"],
            &["--limit", "0"],
            &["--period", "1s", "--algo", "gcra --limit 1 --period 1s"],
            &["--generator", "steady"],
            &["--svg", "x.svg"],
        ] {
            let err = args(bad)
                .and_then(|a| run_compare(&a, "0 a\n".as_bytes(), Vec::new()))
                .unwrap_err();
            assert!(!err.0.contains('\n'), "{bad:?}: {err}");
        }
        let err =
            run_compare(&args(&[]).unwrap(), "0 a\n-1 a\n".as_bytes(), Vec::new()).unwrap_err();
        assert!(err.0.starts_with("line 2: "), "{err}");
    }

    #[test]
    fn durations_print_in_their_largest_unit() {
        assert_eq!(format_duration(Duration::from_secs(1)), "1s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
    }
}
