//! `ratelimit-sim` against the contract (`docs/ALGORITHMS.md`): the built binary
//! on the contract's example, on traces of every algorithm and on every
//! error path; and, in process for speed, thousands of random traces
//! compared line by line with the reference models of `ratelimit-core`'s
//! tests. The subcommands' tests (`generate`, `compare`, `plot`) are the
//! `subcommands` module, so the crate keeps one test binary.

mod subcommands;
mod what_if;

use ratelimit_test_support::model::{Anchor, Model, Spec};
use std::io::Write;
use std::process::{Command, Output, Stdio};

const MS: u64 = 1_000_000;

/// Runs the binary with `args`, feeding it `input`.
fn sim(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimit-sim"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().unwrap();
    // The sim may exit before reading everything (bad options): ignore a
    // broken pipe.
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Runs a good trace: exit 0, nothing on stderr; returns stdout.
fn ok(args: &[&str], input: &str) -> String {
    let out = sim(args, input);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: stderr {}",
        text(&out.stderr)
    );
    assert!(out.stderr.is_empty());
    text(&out.stdout)
}

/// Runs a bad invocation: exit 2, one line on stderr containing every
/// `needles` (case-insensitive), no panic, and exactly `stdout` printed.
fn bad(args: &[&str], input: &str, needles: &[&str], stdout: &str) {
    let out = sim(args, input);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} {input:?}: {err}");
    assert!(
        err.ends_with('\n') && err.trim_end().lines().count() == 1 && !err.trim().is_empty(),
        "{args:?} {input:?}: not one line: {err:?}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let lower = err.to_lowercase();
    for needle in needles {
        assert!(
            lower.contains(&needle.to_lowercase()),
            "{args:?} {input:?}: {err:?} does not mention {needle:?}"
        );
    }
    assert_eq!(text(&out.stdout), stdout, "{args:?} {input:?}");
}

// ---------------------------------------------------------------------
// The contract's example and hand-checked traces, through the binary.

#[test]
fn the_contracts_example() {
    let out = ok(
        &["gcra", "--limit", "3", "--period", "1s", "--burst", "1"],
        "0 a\n100 a\n334 a\n",
    );
    assert_eq!(out, "0 a allow 0 0\n100 a deny 0 234\n334 a allow 0 0\n");
}

#[test]
fn blank_lines_comments_and_costs() {
    let out = ok(
        &["gcra", "--limit", "3", "--period", "1s"],
        "# a comment\n\n0 a 2 # two at once\n   \n0 b\n0 a\n0\ta\t0\n0 a 4\n",
    );
    assert_eq!(
        out,
        "0 a allow 1 0\n0 b allow 2 0\n0 a allow 0 0\n0 a allow 0 0\n0 a deny 0 inf\n"
    );
}

#[test]
fn every_algorithm_by_hand() {
    // token-bucket: the example decided by the contract (7 of the
    // last 8 admitted; the text says 5, see ratelimit-core's
    // tests/it/example.rs).
    let trace: String = std::iter::repeat_n("0 k\n", 5)
        .chain(std::iter::repeat_n("2000 k\n", 4))
        .chain(std::iter::repeat_n("3000 k\n", 8))
        .collect();
    let out = ok(
        &[
            "token-bucket",
            "--capacity",
            "10",
            "--refill",
            "2",
            "--period",
            "1s",
        ],
        &trace,
    );
    let last: Vec<&str> = out.lines().skip(9).collect();
    assert_eq!(
        last,
        [
            "3000 k allow 6 0",
            "3000 k allow 5 0",
            "3000 k allow 4 0",
            "3000 k allow 3 0",
            "3000 k allow 2 0",
            "3000 k allow 1 0",
            "3000 k allow 0 0",
            "3000 k deny 0 500",
        ]
    );

    // leaky-bucket: 2 per 1s, queue 1: held 0, then 500ms, then denied.
    let out = ok(
        &[
            "leaky-bucket",
            "--limit",
            "2",
            "--period",
            "1s",
            "--queue",
            "1",
        ],
        "0 a\n0 a\n0 a\n0 a 3\n499 a\n500 a\n",
    );
    assert_eq!(
        out,
        "0 a allow 1 0\n0 a allow 0 500\n0 a deny 0 500\n0 a deny 0 inf\n\
         499 a deny 0 1\n500 a allow 0 500\n"
    );

    // fixed-window, aligned (the default) and first-request.
    let out = ok(
        &["fixed-window", "--limit", "2", "--period", "1s"],
        "500 a 2\n999 a\n1000 a\n",
    );
    assert_eq!(out, "500 a allow 0 0\n999 a deny 0 1\n1000 a allow 1 0\n");
    let out = ok(
        &[
            "fixed-window",
            "--limit",
            "2",
            "--period",
            "1s",
            "--anchor",
            "first-request",
        ],
        "500 a 2\n999 a\n1499 a\n1500 a\n",
    );
    assert_eq!(
        out,
        "500 a allow 0 0\n999 a deny 0 501\n1499 a deny 0 1\n1500 a allow 1 0\n"
    );
    let aligned = ok(
        &[
            "fixed-window",
            "--limit",
            "2",
            "--period",
            "1s",
            "--anchor",
            "aligned",
        ],
        "500 a 2\n999 a\n1000 a\n",
    );
    assert_eq!(
        aligned,
        "500 a allow 0 0\n999 a deny 0 1\n1000 a allow 1 0\n"
    );

    // sliding-log: 2 per 10s.
    let out = ok(
        &["sliding-log", "--limit", "2", "--period", "10s"],
        "0 a\n4000 a\n5000 a\n9999 a\n10000 a\n",
    );
    assert_eq!(
        out,
        "0 a allow 1 0\n4000 a allow 0 0\n5000 a deny 0 5000\n9999 a deny 0 1\n10000 a allow 0 0\n"
    );

    // sliding-window: 10 per 1s.
    let out = ok(
        &["sliding-window", "--limit", "10", "--period", "1s"],
        "900 a 10\n1000 a\n1100 a\n1500 a 0\n1500 a 6\n",
    );
    assert_eq!(
        out,
        "900 a allow 0 0\n1000 a deny 0 100\n1100 a allow 0 0\n1500 a allow 4 0\n1500 a deny 4 200\n"
    );
}

#[test]
fn help_exits_zero() {
    let out = sim(&["--help"], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("gcra"));
}

/// Every algorithm as the command line names it, with good settings.
const ALGORITHMS: [&str; 6] = [
    "gcra",
    "token-bucket",
    "leaky-bucket",
    "fixed-window",
    "sliding-log",
    "sliding-window",
];

#[test]
fn help_and_version_everywhere_exit_zero() {
    let version = format!(" {}\n", env!("CARGO_PKG_VERSION"));
    let mut commands: Vec<Vec<&str>> = vec![vec![]];
    commands.extend(ALGORITHMS.iter().map(|a| vec![*a]));
    for sub in ["generate", "compare", "plot"] {
        commands.push(vec![sub]);
    }
    for generator in ["steady", "bursty", "poisson", "window-edge"] {
        commands.push(vec!["generate", generator]);
    }
    for command in &commands {
        for flag in ["--help", "-h", "--version", "-V"] {
            let args: Vec<&str> = command.iter().copied().chain([flag]).collect();
            let out = sim(&args, "");
            assert_eq!(
                out.status.code(),
                Some(0),
                "{args:?}: {}",
                text(&out.stderr)
            );
            assert!(out.stderr.is_empty(), "{args:?}");
            let stdout = text(&out.stdout);
            if flag.contains('V') || flag == "--version" {
                // `ratelimit-sim 0.1.0`, `ratelimit-sim-gcra 0.1.0`, ...
                assert!(
                    stdout.starts_with("ratelimit-sim") && stdout.ends_with(&version),
                    "{args:?}: {stdout:?}"
                );
            } else {
                assert!(
                    stdout.contains("Usage: ratelimit-sim"),
                    "{args:?}: {stdout}"
                );
            }
        }
    }
    // Options given too: help still wins.
    let out = sim(&["gcra", "--limit", "3", "--help"], "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn replay_help_explains_the_trace_and_the_columns() {
    for command in [&[][..], &["gcra"], &["sliding-window"]] {
        let args: Vec<&str> = command.iter().copied().chain(["--help"]).collect();
        let help = text(&sim(&args, "").stdout);
        for needle in [
            "T_MS KEY [COST]",
            "T_MS KEY allow|deny REMAINING WAIT_MS",
            "REMAINING  how many more requests of cost 1",
            "`inf`",
            "held",
            "line number",
            "ms, s, m, h or d",
        ] {
            assert!(help.contains(needle), "{args:?} lacks {needle:?}:\n{help}");
        }
    }
    let help = text(&sim(&["gcra", "--help"], "").stdout);
    for option in ["--limit <L>", "--period <P>", "--burst <B>"] {
        assert!(help.contains(option), "{help}");
    }
    let help = text(&sim(&["fixed-window", "--help"], "").stdout);
    assert!(
        help.contains("--anchor <ANCHOR>") && help.contains("first-request"),
        "{help}"
    );
}

// ---------------------------------------------------------------------
// Error paths: exit status 2, one line on stderr, nothing after.

const GCRA: [&str; 5] = ["gcra", "--limit", "3", "--period", "1s"];

#[test]
fn bad_algorithms_and_options() {
    bad(&[], "0 a\n", &["algorithm"], "");
    bad(
        &["gcrb", "--limit", "3", "--period", "1s"],
        "0 a\n",
        &["unknown algorithm", "gcrb"],
        "",
    );
    bad(
        &["GCRA", "--limit", "3", "--period", "1s"],
        "",
        &["unknown algorithm"],
        "",
    );
    // Unknown, duplicate and missing options.
    bad(
        &["gcra", "--limit", "3", "--period", "1s", "--bogus", "1"],
        "0 a\n",
        &["--bogus"],
        "",
    );
    bad(
        &["gcra", "--limit", "3", "--limit", "4", "--period", "1s"],
        "0 a\n",
        &["--limit", "multiple times"],
        "",
    );
    bad(
        &["gcra", "--limit", "3", "--period", "1s", "--period", "1s"],
        "0 a\n",
        &["--period", "multiple times"],
        "",
    );
    bad(&["gcra", "--period", "1s"], "0 a\n", &["--limit"], "");
    bad(&["gcra", "--limit", "3"], "0 a\n", &["--period"], "");
    bad(&["gcra", "--limit", "3", "--period"], "", &["--period"], "");
    bad(&["gcra", "3", "1s"], "", &["3"], "");
    // The subcommands name the bad value too.
    bad(
        &["generate", "zigzag"],
        "",
        &["unknown generator", "zigzag"],
        "",
    );
    bad(&["generate"], "", &["missing generator", "steady"], "");
    bad(
        &["compare", "--generator", "zigzag --rate 1"],
        "",
        &["--generator", "zigzag"],
        "",
    );
    bad(&["plot", "--width", "10"], "", &["--width", "10"], "");
    bad(
        &[
            "compare",
            "--algo",
            "gcra --limit 1 --period 1s",
            "--limit",
            "2",
        ],
        "",
        &["--limit", "--algo"],
        "",
    );
    bad(
        &["token-bucket", "--capacity", "10", "--period", "1s"],
        "",
        &["--refill"],
        "",
    );
    bad(
        &["token-bucket", "--refill", "10", "--period", "1s"],
        "",
        &["--capacity"],
        "",
    );
    bad(
        &["leaky-bucket", "--limit", "10", "--period", "1s"],
        "",
        &["--queue"],
        "",
    );
    bad(&["sliding-log", "--limit", "10"], "", &["--period"], "");
    bad(&["sliding-window", "--period", "1s"], "", &["--limit"], "");
    bad(&["fixed-window", "--limit", "1"], "", &["--period"], "");
    // Options of another algorithm.
    for (args, option) in [
        (
            &["gcra", "--limit", "3", "--period", "1s", "--queue", "1"][..],
            "--queue",
        ),
        (
            &[
                "gcra", "--limit", "3", "--period", "1s", "--anchor", "aligned",
            ],
            "--anchor",
        ),
        (
            &["gcra", "--limit", "3", "--period", "1s", "--capacity", "3"],
            "--capacity",
        ),
        (
            &[
                "token-bucket",
                "--capacity",
                "3",
                "--refill",
                "1",
                "--period",
                "1s",
                "--burst",
                "2",
            ],
            "--burst",
        ),
        (
            &[
                "token-bucket",
                "--capacity",
                "3",
                "--refill",
                "1",
                "--period",
                "1s",
                "--limit",
                "2",
            ],
            "--limit",
        ),
        (
            &[
                "leaky-bucket",
                "--limit",
                "3",
                "--period",
                "1s",
                "--queue",
                "1",
                "--burst",
                "2",
            ],
            "--burst",
        ),
        (
            &[
                "fixed-window",
                "--limit",
                "3",
                "--period",
                "1s",
                "--burst",
                "2",
            ],
            "--burst",
        ),
        (
            &[
                "sliding-log",
                "--limit",
                "3",
                "--period",
                "1s",
                "--anchor",
                "aligned",
            ],
            "--anchor",
        ),
        (
            &[
                "sliding-window",
                "--limit",
                "3",
                "--period",
                "1s",
                "--queue",
                "0",
            ],
            "--queue",
        ),
    ] {
        bad(args, "0 a\n", &[option], "");
    }
    // A bad anchor.
    bad(
        &[
            "fixed-window",
            "--limit",
            "3",
            "--period",
            "1s",
            "--anchor",
            "sliding",
        ],
        "",
        &["--anchor", "sliding"],
        "",
    );
    // Bad integers.
    for value in ["1.5", "-1", "abc", "", "3x", "99999999999999999999"] {
        bad(
            &["gcra", "--limit", value, "--period", "1s"],
            "0 a\n",
            &["--limit"],
            "",
        );
    }
}

#[test]
fn bad_durations() {
    for period in [
        "1.5s", "5x", "-1s", "1", "", "s", "1 s", "1S", "1sec", "0x1s",
    ] {
        bad(
            &["gcra", "--limit", "3", "--period", period],
            "0 a\n",
            &["--period"],
            "",
        );
    }
    // Zero and too long.
    for period in ["0s", "0ms", "0d"] {
        bad(
            &["gcra", "--limit", "3", "--period", period],
            "0 a\n",
            &["period"],
            "",
        );
    }
    bad(
        &["sliding-window", "--limit", "3", "--period", "300000d"],
        "",
        &["period"],
        "",
    );
    bad(
        &[
            "fixed-window",
            "--limit",
            "3",
            "--period",
            "99999999999999999999ms",
        ],
        "",
        &["period"],
        "",
    );
}

#[test]
fn zero_and_overflowing_settings() {
    bad(
        &["gcra", "--limit", "0", "--period", "1s"],
        "",
        &["limit"],
        "",
    );
    bad(
        &["gcra", "--limit", "3", "--period", "1s", "--burst", "0"],
        "",
        &["burst"],
        "",
    );
    bad(
        &[
            "token-bucket",
            "--capacity",
            "0",
            "--refill",
            "1",
            "--period",
            "1s",
        ],
        "",
        &["capacity"],
        "",
    );
    bad(
        &[
            "token-bucket",
            "--capacity",
            "1",
            "--refill",
            "0",
            "--period",
            "1s",
        ],
        "",
        &["refill"],
        "",
    );
    bad(
        &[
            "leaky-bucket",
            "--limit",
            "0",
            "--period",
            "1s",
            "--queue",
            "1",
        ],
        "",
        &["limit"],
        "",
    );
    bad(
        &["fixed-window", "--limit", "0", "--period", "1s"],
        "",
        &["limit"],
        "",
    );
    bad(
        &["sliding-log", "--limit", "0", "--period", "1s"],
        "",
        &["limit"],
        "",
    );
    bad(
        &["sliding-window", "--limit", "0", "--period", "1s"],
        "",
        &["limit"],
        "",
    );
    // A window (B * T, so a possible wait) longer than a `Duration` can
    // hold, a queue of 2^64 - 1 (its `remaining` would pass u64), and a
    // sliding log too long.
    bad(
        &[
            "gcra",
            "--limit",
            "1",
            "--period",
            "1d",
            "--burst",
            "18446744073709551615",
        ],
        "",
        &["burst", "large"],
        "",
    );
    bad(
        &[
            "token-bucket",
            "--capacity",
            "18446744073709551615",
            "--refill",
            "1",
            "--period",
            "1d",
        ],
        "",
        &["capacity", "large"],
        "",
    );
    bad(
        &[
            "leaky-bucket",
            "--limit",
            "1",
            "--period",
            "1d",
            "--queue",
            "18446744073709551615",
        ],
        "",
        &["queue"],
        "",
    );
    bad(
        &["sliding-log", "--limit", "1000000", "--period", "1s"],
        "",
        &["sliding log", "1000000"],
        "",
    );
    // The queue may be 0.
    assert_eq!(
        ok(
            &[
                "leaky-bucket",
                "--limit",
                "1",
                "--period",
                "1s",
                "--queue",
                "0"
            ],
            "0 a\n"
        ),
        "0 a allow 0 0\n"
    );
}

// ---------------------------------------------------------------------
// Settings too wide for the 8-byte state: the sim picks the 16-byte one.

#[test]
fn gcra_30001_per_day() {
    // T = 86400000 / 30001 ms = 2879.904003... ms.
    let args = ["gcra", "--limit", "30001", "--period", "1d"];
    let out = ok(
        &args,
        "0 a 30001\n0 a\n2879 a\n2880 a\n2880 b\n86400000 a 0\n86400000 a 30001\n",
    );
    assert_eq!(
        out,
        "0 a allow 0 0\n0 a deny 0 2880\n2879 a deny 0 1\n2880 a allow 0 0\n\
         2880 b allow 30000 0\n86400000 a allow 30000 0\n86400000 a deny 30000 2880\n"
    );
    // Random traces, against the model.
    let spec = Spec::Gcra {
        limit: 30_001,
        period: 86_400 * 1_000 * MS,
        burst: 30_001,
    };
    let mut rng = Rng(30_001);
    for _ in 0..5 {
        let (input, expected) = random_trace(&mut rng, &spec, 300);
        assert_eq!(ok(&args, &input), expected, "{input}");
    }
}

#[test]
fn token_bucket_of_a_million_refilled_7_per_day() {
    // T = 86400000 / 7 ms = 12342857.142857... ms.
    let args = [
        "token-bucket",
        "--capacity",
        "1000000",
        "--refill",
        "7",
        "--period",
        "1d",
    ];
    let out = ok(
        &args,
        "0 b 1000001\n0 a 1000000\n0 a\n0 a 3\n12342857 a\n12342858 a\n12342858 b 0\n",
    );
    assert_eq!(
        out,
        "0 b deny 1000000 inf\n0 a allow 0 0\n0 a deny 0 12342858\n0 a deny 0 37028572\n\
         12342857 a deny 0 1\n12342858 a allow 0 0\n12342858 b allow 1000000 0\n"
    );
    let spec = Spec::Gcra {
        limit: 7,
        period: 86_400 * 1_000 * MS,
        burst: 1_000_000,
    };
    let mut rng = Rng(7);
    for _ in 0..5 {
        let (input, expected) = random_trace(&mut rng, &spec, 300);
        assert_eq!(ok(&args, &input), expected, "{input}");
    }
}

#[test]
fn wide_leaky_bucket_and_extreme_settings() {
    // 7 per day, a million may wait: held T = 12342857.142857... ms.
    let out = ok(
        &[
            "leaky-bucket",
            "--limit",
            "7",
            "--period",
            "1d",
            "--queue",
            "1000000",
        ],
        "0 a\n0 a\n0 a 1000000\n0 a 1000002\n",
    );
    assert_eq!(
        out,
        "0 a allow 1000000 0\n0 a allow 999999 12342858\n0 a deny 999999 12342858\n\
         0 a deny 999999 inf\n"
    );
    // The largest limit: 2^64 - 1 per second, burst the same.
    let out = ok(
        &["gcra", "--limit", "18446744073709551615", "--period", "1s"],
        "0 a\n0 a 18446744073709551614\n0 a\n1 a 18446744073709550\n",
    );
    assert_eq!(
        out,
        "0 a allow 18446744073709551614 0\n0 a allow 0 0\n0 a deny 0 1\n1 a allow 1 0\n"
    );
    // The longest window a `Duration` holds: 2^64 - 1 seconds.
    let out = ok(
        &[
            "gcra",
            "--limit",
            "1",
            "--period",
            "1s",
            "--burst",
            "18446744073709551615",
        ],
        "0 a 18446744073709551615\n0 a 18446744073709551615\n",
    );
    assert_eq!(out, "0 a allow 0 0\n0 a deny 0 18446744073709551615000\n");
}

#[test]
fn bad_lines_stop_the_run() {
    let good = "0 a\n# comment\n\n5 b\n";
    let printed = "0 a allow 2 0\n5 b allow 2 0\n";
    for (line, needles) in [
        ("3 a", &["line 5", "time"][..]),
        ("x a", &["line 5", "time"]),
        ("-1 a", &["line 5", "time"]),
        ("1.5 a", &["line 5", "time"]),
        ("+7 a", &["line 5", "time"]),
        ("99999999999999999999 a", &["line 5", "time"]),
        // Fits in u64 milliseconds, not in u64 nanoseconds.
        ("18446744073710 a", &["line 5", "time"]),
        ("7", &["line 5", "key"]),
        ("7 a 1.5", &["line 5", "cost"]),
        ("7 a -1", &["line 5", "cost"]),
        ("7 a x", &["line 5", "cost"]),
        ("7 a 18446744073709551616", &["line 5", "cost"]),
        ("7 a 1 extra", &["line 5", "extra"]),
        ("7 a 1 2", &["line 5", "2"]),
    ] {
        let input = format!("{good}{line}\n9 a\n10 b\n");
        bad(&GCRA, &input, needles, printed);
        // The same line last, without a newline.
        bad(&GCRA, &format!("{good}{line}"), needles, printed);
    }
    // A bad line first.
    bad(&GCRA, "a 0\n0 a\n", &["line 1"], "");
}

#[test]
fn the_largest_time_that_fits() {
    // 18446744073709 ms is the last millisecond within u64 nanoseconds.
    for algorithm in [
        &GCRA[..],
        &[
            "token-bucket",
            "--capacity",
            "3",
            "--refill",
            "3",
            "--period",
            "1s",
        ],
        &[
            "leaky-bucket",
            "--limit",
            "3",
            "--period",
            "1s",
            "--queue",
            "2",
        ],
        &["fixed-window", "--limit", "3", "--period", "1s"],
        &[
            "fixed-window",
            "--limit",
            "3",
            "--period",
            "1s",
            "--anchor",
            "first-request",
        ],
        &["sliding-log", "--limit", "3", "--period", "1s"],
        &["sliding-window", "--limit", "3", "--period", "1s"],
    ] {
        let out = ok(
            algorithm,
            "18446744073709 a 3\n18446744073709 a\n18446744073709 a 4\n",
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{algorithm:?}");
        assert!(
            lines[0].starts_with("18446744073709 a allow 0 "),
            "{algorithm:?}: {out}"
        );
        assert!(
            lines[1].starts_with("18446744073709 a deny 0 "),
            "{algorithm:?}: {out}"
        );
        assert_eq!(lines[2], "18446744073709 a deny 0 inf", "{algorithm:?}");
    }
    // The window [18446744073s, 18446744074s) ends past u64 nanoseconds
    // (18446744073.709551615s): the wait is still exact, 291ms (a saturated
    // end would say 1ms).
    let out = ok(
        &["fixed-window", "--limit", "1", "--period", "1s"],
        "18446744073709 a\n18446744073709 a\n",
    );
    assert_eq!(
        out,
        "18446744073709 a allow 0 0\n18446744073709 a deny 0 291\n"
    );
}

// ---------------------------------------------------------------------
// Random traces against the reference models.

// splitmix64: a small deterministic generator, so the traces are the same
// on every run.
use ratelimit_test_support::SplitMix64 as Rng;

/// A random setting of `kind` (0..7): the sim's arguments and the model.
fn random_config(rng: &mut Rng, kind: u64) -> (Vec<String>, Spec) {
    let small = 1 + rng.below(40);
    // Large primes make T = P / L a fraction with a large denominator, and
    // the idle horizon of the scaled time short (999999937 per 1ms: 4.6s).
    let limit = rng.pick(&[1, 2, 3, 7, 10, 999, small, small, 7_919, 999_999_937]);
    let (period, period_ms) = rng.pick(&[
        ("1ms", 1),
        ("7ms", 7),
        ("100ms", 100),
        ("1s", 1_000),
        ("3s", 3_000),
        ("1m", 60_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
    ]);
    let p = period_ms * MS;
    let mut args: Vec<String> = Vec::new();
    let mut push = |xs: &[&str]| args.extend(xs.iter().map(|s| s.to_string()));
    let (l, b, q) = (
        limit.to_string(),
        (1 + rng.below(12)).to_string(),
        rng.below(6),
    );
    let spec = match kind {
        0 => {
            push(&["gcra", "--limit", &l, "--period", period]);
            Spec::Gcra {
                limit,
                period: p,
                burst: limit,
            }
        }
        1 => {
            push(&["gcra", "--limit", &l, "--period", period, "--burst", &b]);
            Spec::Gcra {
                limit,
                period: p,
                burst: b.parse().unwrap(),
            }
        }
        2 => {
            push(&[
                "token-bucket",
                "--capacity",
                &b,
                "--refill",
                &l,
                "--period",
                period,
            ]);
            Spec::Gcra {
                limit,
                period: p,
                burst: b.parse().unwrap(),
            }
        }
        3 => {
            let qs = q.to_string();
            push(&[
                "leaky-bucket",
                "--limit",
                &l,
                "--period",
                period,
                "--queue",
                &qs,
            ]);
            Spec::Leaky {
                limit,
                period: p,
                queue: q,
            }
        }
        4 => {
            push(&["fixed-window", "--limit", &l, "--period", period]);
            let anchor = match rng.below(3) {
                0 => Anchor::Aligned,
                1 => {
                    push(&["--anchor", "aligned"]);
                    Anchor::Aligned
                }
                _ => {
                    push(&["--anchor", "first-request"]);
                    Anchor::FirstRequest
                }
            };
            Spec::Fixed {
                limit,
                period: p,
                anchor,
            }
        }
        5 => {
            push(&["sliding-log", "--limit", &l, "--period", period]);
            Spec::Log { limit, period: p }
        }
        _ => {
            push(&["sliding-window", "--limit", &l, "--period", period]);
            Spec::Window { limit, period: p }
        }
    };
    (args, spec)
}

/// A random trace for `spec`, and what the contract says the sim prints.
fn random_trace(rng: &mut Rng, spec: &Spec, len: usize) -> (String, String) {
    let mut model = Model::<String>::new(*spec);
    let period_ms = spec.period() / MS;
    let t_ms_per_request = (period_ms / spec.limit()).max(1);
    // Few keys, or many (so the store's shards grow and drop full keys).
    let keys: Vec<String> = match rng.below(4) {
        0 => (0..500).map(|k| format!("k{k}")).collect(),
        _ => ["a", "b", "c", "user-1"].map(String::from).to_vec(),
    };
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut last_wait: std::collections::HashMap<&str, u64> = Default::default();
    let (mut input, mut expected) = (String::new(), String::new());
    let mut t = 0u64;
    for _ in 0..len {
        let key = rng.pick(&keys);
        t += match rng.below(12) {
            0..=3 => 0,
            4 => 1,
            5 => (t / period_ms + 1) * period_ms - t,
            6 => (t / period_ms + 1) * period_ms - t - 1,
            // (A wait past the last millisecond of u64 nanoseconds, which
            // wide settings may give, is not taken.)
            7 | 8 => last_wait
                .get(key)
                .copied()
                .filter(|w| t.checked_add(*w).is_some_and(|end| end <= u64::MAX / MS))
                .unwrap_or(0),
            9 => rng.below(t_ms_per_request + 1),
            10 => rng.below(period_ms + 1),
            11 if rng.below(4) == 0 => rng.below(100_000),
            _ => rng.below(3 * period_ms + 1),
        };
        let cap = spec.capacity();
        let cost = match rng.below(10) {
            0 => None,
            1..=4 => None,
            5 => Some(0),
            6 => Some(cap),
            7 => Some(cap + 1),
            _ => Some(1 + rng.below(cap.min(5))),
        };
        match rng.below(20) {
            0 => input.push_str("# a comment line\n"),
            1 => input.push('\n'),
            _ => {}
        }
        match cost {
            None => input.push_str(&format!("{t} {key}\n")),
            Some(c) if rng.below(5) == 0 => input.push_str(&format!("{t}  {key}\t{c} # note\n")),
            Some(c) => input.push_str(&format!("{t} {key} {c}\n")),
        }
        let out = model.check(&key.to_owned(), cost.unwrap_or(1), t * MS);
        let wait = match out.wait {
            None => "inf".to_owned(),
            Some(ns) => ns.div_ceil(u128::from(MS)).to_string(),
        };
        let verdict = if out.allowed { "allow" } else { "deny" };
        expected.push_str(&format!("{t} {key} {verdict} {} {wait}\n", out.remaining));
        match (out.allowed, out.wait) {
            (false, Some(ns)) => {
                last_wait.insert(
                    key,
                    u64::try_from(ns.div_ceil(u128::from(MS))).unwrap_or(u64::MAX),
                );
            }
            _ => {
                last_wait.remove(key);
            }
        }
    }
    (input, expected)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether `ratelimit-core` refuses the setting: GCRA's `B * T` (the token
/// bucket's `C * P / R`) over 2^125 units of `1 / (L / gcd(L, P))` ns even
/// in the 16-byte state, or longer than a `Duration` (the leaky bucket's
/// `(Q + 2) * T`, resp. `(Q + 1) * T`, and `Q` up to 2^64 - 2); or a sliding
/// log over its bound of entries per key.
fn beyond_exact_arithmetic(spec: &Spec) -> bool {
    let wide_span = |limit: u64, period: u64, count: u128, window: u128| {
        count * u128::from(period / gcd(limit, period)) > 1 << 125
            || (window * u128::from(period)).div_ceil(u128::from(limit))
                > std::time::Duration::MAX.as_nanos()
    };
    match *spec {
        Spec::Gcra {
            limit,
            period,
            burst,
        } => wide_span(limit, period, u128::from(burst), u128::from(burst)),
        Spec::Leaky {
            limit,
            period,
            queue,
        } => {
            queue == u64::MAX
                || wide_span(limit, period, u128::from(queue) + 2, u128::from(queue) + 1)
        }
        // The sim keeps the library's default bound on a sliding log.
        Spec::Log { limit, .. } => limit > 10_000,
        _ => false,
    }
}

/// Thousands of random traces through the library's `replay` (the code the
/// binary runs), every line compared with the model.
#[test]
fn random_traces_in_process() {
    let mut rng = Rng(0x5eed);
    for round in 0..2_100u64 {
        let kind = round % 7;
        let (args, spec) = random_config(&mut rng, kind);
        let algorithm = match ratelimit_sim::parse_algorithm(&args) {
            Ok(a) => a,
            Err(e) => {
                // Only settings beyond the exact arithmetic are refused.
                assert!(beyond_exact_arithmetic(&spec), "{args:?}: {e}");
                continue;
            }
        };
        let len = 1 + rng.below(80) as usize;
        let (input, expected) = random_trace(&mut rng, &spec, len);
        let mut out = Vec::new();
        ratelimit_sim::replay(algorithm, input.as_bytes(), &mut out).expect("good trace");
        let out = text(&out);
        if out != expected {
            let diff = out
                .lines()
                .zip(expected.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "round {round}: {args:?}\ninput:\n{input}\nfirst difference at output line {}:\n  sim   {:?}\n  model {:?}",
                diff + 1,
                out.lines().nth(diff),
                expected.lines().nth(diff)
            );
        }
    }
}

/// A few random traces of each algorithm through the binary itself.
#[test]
fn random_traces_through_the_binary() {
    let mut rng = Rng(0xb1_4a_12);
    for round in 0..21u64 {
        let (args, spec) = random_config(&mut rng, round % 7);
        if beyond_exact_arithmetic(&spec) {
            continue;
        }
        let (input, expected) = random_trace(&mut rng, &spec, 200);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(ok(&args, &input), expected, "{args:?}\n{input}");
    }
}

/// A random setting of GCRA, the token bucket or the leaky bucket (`kind`
/// 0..3) that is often too wide for the 8-byte state: long periods, large
/// primes, large bursts and queues.
fn random_wide_config(rng: &mut Rng, kind: u64) -> (Vec<String>, Spec) {
    let limit = rng.pick(&[1, 7, 30_001, 86_399, 999_999_937, 4_294_967_311]);
    let (period, period_ms) = rng.pick(&[
        ("1s", 1_000u64),
        ("7s", 7_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("30d", 2_592_000_000),
        ("365d", 31_536_000_000),
    ]);
    let random = 1 + rng.below(1 << 20);
    let count = rng.pick(&[1u64, 10, limit, 1_000_000, random, 1_000_000_000, 1 << 40]);
    let p = period_ms * MS;
    let (l, c) = (limit.to_string(), count.to_string());
    let args = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match kind {
        0 => (
            args(&["gcra", "--limit", &l, "--period", period, "--burst", &c]),
            Spec::Gcra {
                limit,
                period: p,
                burst: count,
            },
        ),
        1 => (
            args(&[
                "token-bucket",
                "--capacity",
                &c,
                "--refill",
                &l,
                "--period",
                period,
            ]),
            Spec::Gcra {
                limit,
                period: p,
                burst: count,
            },
        ),
        _ => {
            let q = (count - 1).to_string();
            (
                args(&[
                    "leaky-bucket",
                    "--limit",
                    &l,
                    "--period",
                    period,
                    "--queue",
                    &q,
                ]),
                Spec::Leaky {
                    limit,
                    period: p,
                    queue: count - 1,
                },
            )
        }
    }
}

/// Random traces of wide settings through the library's `replay`, every
/// line compared with the model, and a few through the binary.
#[test]
fn random_wide_traces() {
    let mut rng = Rng(0x3_1de);
    let mut accepted = 0;
    for round in 0..600u64 {
        let (args, spec) = random_wide_config(&mut rng, round % 3);
        let algorithm = match ratelimit_sim::parse_algorithm(&args) {
            Ok(a) => a,
            Err(e) => {
                assert!(beyond_exact_arithmetic(&spec), "{args:?}: {e}");
                continue;
            }
        };
        assert!(!beyond_exact_arithmetic(&spec), "{args:?}");
        accepted += 1;
        let len = 1 + rng.below(80) as usize;
        let (input, expected) = random_trace(&mut rng, &spec, len);
        if round % 50 == 0 {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(ok(&args, &input), expected, "{args:?}\n{input}");
        }
        let mut out = Vec::new();
        ratelimit_sim::replay(algorithm, input.as_bytes(), &mut out).expect("good trace");
        assert_eq!(text(&out), expected, "round {round}: {args:?}\n{input}");
    }
    assert!(accepted > 500, "{accepted}");
}
