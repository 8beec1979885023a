//! The `generate`, `compare` and `plot` subcommands, run as the binary.
//!
//! Not a test target of its own (Cargo only picks up `tests/*.rs` and
//! `tests/*/main.rs`): `tests/cli.rs` includes it with `mod subcommands;`,
//! so the crate keeps one integration-test binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn sim(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimit-sim"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ratelimit-sim");
    // The process may exit before reading (bad options): a broken pipe
    // here is expected then.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn generate_prints_a_trace_the_main_mode_reads() {
    let o = sim(
        &[
            "generate",
            "window-edge",
            "--limit",
            "2",
            "--period",
            "1s",
            "--duration",
            "2s",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let trace = stdout(&o);
    assert_eq!(
        trace,
        "900 client 1\n950 client 1\n1000 client 1\n1050 client 1\n"
    );
    let o = sim(&["fixed-window", "--limit", "2", "--period", "1s"], &trace);
    assert_eq!(
        stdout(&o),
        "900 client allow 1 0\n950 client allow 0 0\n1000 client allow 1 0\n1050 client allow 0 0\n"
    );
}

#[test]
fn compare_prints_one_row_per_algorithm() {
    let o = sim(
        &[
            "compare",
            "--generator",
            "window-edge --limit 10 --period 1s --duration 10s",
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .take(6)
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let n = words.len();
            vec![words[0], words[n - 5], words[n - 8]]
        })
        .collect();
    // (algorithm, max in P, admitted)
    assert_eq!(
        rows,
        [
            ["gcra", "11", "55"],
            ["token-bucket", "11", "55"],
            ["leaky-bucket", "10", "55"],
            ["fixed-window", "20", "100"],
            ["sliding-log", "10", "50"],
            ["sliding-window", "10", "50"],
        ]
    );
}

#[test]
fn compare_reads_a_trace_on_stdin() {
    let o = sim(
        &[
            "compare",
            "--algo",
            "fixed-window --limit 2 --period 1s; sliding-log --limit 2 --period 1s",
        ],
        "990 a\n995 a\n1000 a\n1005 a\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("fixed-window --limit 2 --period 1s"));
    assert!(text.lines().nth(1).unwrap().contains(" 4       0 "));
    assert!(text.lines().nth(2).unwrap().contains(" 2       2 "));
}

#[test]
fn plot_writes_an_svg() {
    let path = std::env::temp_dir().join(format!("ratelimit-sim-cli-{}.svg", std::process::id()));
    let o = sim(
        &[
            "plot",
            "--generator",
            "window-edge --limit 10 --period 1s --duration 4s",
            "--svg",
            path.to_str().unwrap(),
        ],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("sliding-window --limit 10 --period 1s"));

    let o = sim(
        &["plot", "--algo", "gcra --limit 1 --period 1s"],
        "0 a\n1 a\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("<svg"));
}

#[test]
fn subcommands_reject_bad_options_with_status_2() {
    let cases: [&[&str]; 6] = [
        &["plot", "--nope", "1"],
        &["plot", "--algo", "gcra --limit 0 --period 1s"],
        &["compare", "--generator", "zigzag"],
        &["compare", "--interval", "0s"],
        &["generate"],
        &["generate", "steady", "--rate", "1"],
    ];
    for args in cases {
        let o = sim(args, "0 a\n");
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with("ratelimit-sim: "), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let o = sim(&["compare"], "0 a\n5 a\n3 a\n");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "ratelimit-sim: line 3: time 3 is before the previous time 5\n"
    );
}

#[test]
fn subcommands_have_help() {
    for (args, needle) in [
        (&["plot", "--help"][..], "-o, --svg <FILE>"),
        (&["compare", "-h"], "--interval <D>"),
        (&["compare", "-h"], "differs from sliding-log"),
        (&["generate", "--help"], "window-edge"),
        (&["generate", "window-edge", "--help"], "--spread <W>"),
        (&["--help"], "subcommands"),
    ] {
        let o = sim(args, "");
        assert!(o.status.success(), "{args:?}");
        assert!(stdout(&o).contains(needle), "{args:?}");
    }
}
