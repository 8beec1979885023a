//! `ratelimit-sim what-if`, run as the binary: every format's fixture
//! (`tests/fixtures/what-if`), gzip, format detection, `--json`,
//! `--against` and `--svg` (this module); and logs written by a real nginx
//! in front of the axum example, replayed request by request
//! ([`nginx`]).

mod nginx;
mod plans;

use std::path::PathBuf;
use std::process::{Command, Output};

/// A fixture's path.
fn fixture(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/what-if");
    dir.join(name).to_string_lossy().into_owned()
}

/// Runs `ratelimit-sim what-if ARGS`.
fn what_if(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ratelimit-sim"))
        .arg("what-if")
        .args(args)
        .output()
        .expect("run ratelimit-sim")
}

/// Runs it, expecting success: its standard output.
fn ok(args: &[&str]) -> String {
    let o = what_if(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {err}");
    String::from_utf8(o.stdout).unwrap()
}

/// A fresh temporary directory, its own for each call (tests run at once).
fn temp_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("what-if-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixtures' traffic through `policy.toml`, line by line: 5 failed
/// logins then a successful one from one client (3 a hour: the 4th on is
/// limited, whatever its status), 3 GETs and a HEAD of the items API from
/// another (2 a minute, HEAD under GET), then an unlimited route.
const DECISIONS: &str = "\
1 401 admitted
2 401 admitted
3 401 admitted
4 401 limited login 203.0.113.7
5 401 limited login 203.0.113.7
6 200 limited login 203.0.113.7
7 200 admitted
8 200 admitted
9 200 limited api 198.51.100.2
10 200 limited api 198.51.100.2
11 200 admitted
";

/// The decisions `what-if` writes for `log` (with `extra` options).
fn decisions(log: &str, extra: &[&str]) -> String {
    let dir = temp_dir(&log.replace(['/', '.'], "-"));
    let out = dir.join("decisions.txt");
    let out = out.to_str().unwrap();
    let policy = fixture("policy.toml");
    let mut args = vec!["--policy", &policy, "--log", log, "--decisions", out];
    args.extend_from_slice(extra);
    ok(&args);
    let decisions = std::fs::read_to_string(out).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    decisions
}

#[test]
fn every_format_gives_the_same_decisions() {
    for (log, extra) in [
        ("combined.log", &[][..]),
        ("combined-xff.log", &["--trusted-proxies", "10.0.0.5"][..]),
        ("access.jsonl", &["--field", "remote=client"][..]),
        ("alb.log", &[][..]),
        ("envoy.log", &[][..]),
    ] {
        assert_eq!(decisions(&fixture(log), extra), DECISIONS, "{log}");
        // Detected, and given: the same.
        let format = match log {
            "access.jsonl" => "json",
            "alb.log" => "alb",
            "envoy.log" => "envoy",
            _ => "nginx",
        };
        let mut given = extra.to_vec();
        given.extend(["--format", format]);
        assert_eq!(decisions(&fixture(log), &given), DECISIONS, "{log}");
    }
}

#[test]
fn shaped_and_dry_run_limits_replay_as_they_run() {
    let dir = temp_dir("modes");
    let out = dir.join("decisions.txt");
    let report = ok(&[
        "--policy",
        &fixture("policy-modes.toml"),
        "--log",
        &fixture("combined.log"),
        "--decisions",
        out.to_str().unwrap(),
    ]);
    let decisions = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    // A dry run refuses nothing and consumes nothing for what it would
    // refuse; a shaped request is held, then goes on (its hold passes at
    // once on the replay's clock).
    let expected = DECISIONS.replace("limited login", "dry-run login");
    assert_eq!(decisions, expected);
    assert!(
        report.contains("\nlogin                    dry-run "),
        "{report}"
    );
    assert!(
        report.contains("\napi                      shape "),
        "{report}"
    );
}

#[test]
fn forwarded_addresses_count_only_from_trusted_proxies() {
    // Untrusted, the proxy is every request's client: one key for all.
    let all = decisions(&fixture("combined-xff.log"), &[]);
    assert!(all.contains("9 200 limited api 10.0.0.5"), "{all}");
}

#[test]
fn gzip_is_read_as_it_is() {
    use std::io::Write;
    let dir = temp_dir("gzip");
    let path = dir.join("access.log.1");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(&std::fs::read(fixture("combined.log")).unwrap())
        .unwrap();
    gz.finish().unwrap();
    assert_eq!(decisions(path.to_str().unwrap(), &[]), DECISIONS);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_table_counts_per_limit_and_route() {
    let out = ok(&[
        "--policy",
        &fixture("policy.toml"),
        "--log",
        &fixture("combined.log"),
    ]);
    assert!(
        out.starts_with("what-if: 11 lines (nginx), 11 replayed, 0 skipped"),
        "{out}"
    );
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name:?} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // name mode seen admitted limited no-key succeeded keys ...
    assert_eq!(
        row("login ")[..8],
        ["login", "enforce", "6", "3", "3", "0", "1", "1"]
    );
    assert_eq!(
        row("api ")[..8],
        ["api", "enforce", "4", "2", "2", "0", "2", "1"]
    );
    assert!(out.contains("HEAD /api/items"), "{out}");
    assert!(out.contains("login: 203.0.113.7 (3)"), "{out}");
}

#[test]
fn json_parses_and_redact_hides_keys() {
    let out = ok(&[
        "--policy",
        &fixture("policy.toml"),
        "--log",
        &fixture("alb.log"),
        "--json",
        "--redact",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("--json is JSON");
    assert_eq!(v["format"], "alb");
    assert_eq!(v["replayed"], 11);
    let login = &v["limits"][0];
    assert_eq!(login["name"], "login");
    assert_eq!(login["limited"], 3);
    assert_eq!(login["limited_succeeded"], 1);
    assert_eq!(login["distinct_keys_limited"], 1);
    assert_eq!(login["first_limited_minute"], "2025-12-02 10:00");
    assert_eq!(login["busiest_minute"]["limited"], 3);
    assert_eq!(login["key_cap"]["reached"], false);
    let key = login["top_keys"][0]["key"].as_str().unwrap();
    assert!(
        key.starts_with("key:") && !out.contains("203.0.113.7"),
        "{out}"
    );
    assert_eq!(v["limits"][1]["routes"][1]["route"], "HEAD /api/items");
}

#[test]
fn against_shows_a_changed_limit() {
    let args = [
        "--policy",
        &fixture("policy.toml"),
        "--against",
        &fixture("policy-loose.toml"),
        "--log",
        &fixture("envoy.log"),
    ];
    let out = ok(&args);
    assert!(
        out.contains("2 requests limited by the new policy and not the current one (2 of them served in the log), 0 limited by the current one and not the new, 3 by both"),
        "{out}"
    );
    assert!(out.contains("  api: 1 keys limited by the new policy only [198.51.100.2 (2)]; 0 by the current only []"), "{out}");
    let mut json = args.to_vec();
    json.push("--json");
    let v: serde_json::Value = serde_json::from_str(&ok(&json)).unwrap();
    let against = &v["against"];
    assert_eq!(against["requests_limited_by_new_only"], 2);
    assert_eq!(against["current"]["limits"][1]["limited"], 0);
    assert_eq!(
        against["limits"][1]["keys_limited_by_new_only"][0]["key"],
        "198.51.100.2"
    );
}

#[test]
fn the_key_cap_is_reported() {
    let out = ok(&[
        "--policy",
        &fixture("policy.toml"),
        "--log",
        &fixture("combined.log"),
        "--max-keys",
        "1",
    ]);
    assert!(out.contains("its store reached its cap of 1 keys"), "{out}");
}

#[test]
fn svg_draws_a_panel_per_limit() {
    let dir = temp_dir("svg");
    let svg = dir.join("what-if.svg");
    ok(&[
        "--policy",
        &fixture("policy.toml"),
        "--log",
        &fixture("combined.log"),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(svg).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("login (enforce)") && svg.contains("api (enforce)"));
}

#[test]
fn errors_name_what_is_wrong() {
    let bad = |args: &[&str], needle: &str| {
        let o = what_if(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    let policy = fixture("policy.toml");
    bad(
        &["--policy", &policy, "--log", "/nonexistent.log"],
        "cannot open the log /nonexistent.log",
    );
    bad(
        &["--policy", &policy, "--log", &policy],
        "cannot tell the log's format",
    );
    bad(
        &[
            "--policy",
            &policy,
            "--log",
            &fixture("alb.log"),
            "--field",
            "colour=x",
        ],
        "unknown part \"colour\"",
    );
    bad(
        &[
            "--policy",
            &policy,
            "--log",
            &fixture("alb.log"),
            "--trusted-proxies",
            "10.0.0.0/99",
        ],
        "bad --trusted-proxies",
    );
    let axum = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/axum/ratelimit.toml"
    );
    bad(
        &["--policy", axum, "--log", &fixture("alb.log")],
        "--app-key known-api-key=SPEC",
    );
}

#[test]
fn a_wrong_format_skips_lines_and_says_why() {
    let out = ok(&[
        "--policy",
        &fixture("policy.toml"),
        "--log",
        &fixture("alb.log"),
        "--format",
        "nginx",
    ]);
    assert!(
        out.contains("11 replayed, 0 skipped") || out.contains("0 replayed, 11 skipped"),
        "{out}"
    );
    assert!(out.contains("first skipped line: 1:"), "{out}");
}
