//! `axum-example` as a process: it logs by default, and refuses bad
//! settings at startup naming the variable.

use ratelimit_test_support::redis_server;
use ratelimit_test_support::spawned::{run_to_exit, Spawned};
use std::process::Command;

/// The shipped file's limits in memory, the environment looked up by
/// `var`, for the app in process.
pub(crate) fn limits(var: impl Fn(&str) -> Option<String>) -> tower_ratelimit::deploy::Limits {
    tower_ratelimit::deploy::Limits::from_toml(axum_example::DEFAULT_POLICY, None, var).unwrap()
}

/// The binary on a free port with none of the settings from the
/// environment of the test.
pub(crate) fn example() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_axum-example"));
    for var in [
        "API_KEYS",
        "REDIS_URL",
        "REDIS_TLS_CA",
        "RATELIMIT_MAX_KEYS",
        "RATELIMIT_CONFIG",
        "RUST_LOG",
        "TRUSTED_PROXIES",
        "TRUSTED_PROXY_HEADER",
        "LOG_FORMAT",
        "METRICS_ADDR",
        "ADMIN_ADDR",
        "ADMIN_TOKEN",
        "MAX_CONNECTIONS",
        "MAX_CONNECTIONS_PER_CLIENT",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("BIND_ADDR", "127.0.0.1:0");
    cmd
}

#[test]
fn logs_at_info_by_default() {
    let app = Spawned::start(example());
    app.assert_info_log(&[
        "limits in memory",
        "max_keys=1000000",
        "no trusted proxies",
        "no API keys (API_KEYS): every X-API-Key is answered 401",
        "header_read_timeout: 10s",
        "listening on 127.0.0.1:",
    ]);
    // No keys configured: a made-up key is refused.
    let made_up =
        "GET /api/items HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-API-Key: guess\r\n\r\n";
    assert_eq!(app.status(made_up), 401);
}

#[cfg(unix)]
#[test]
fn sigterm_stops_gracefully() {
    let mut app = Spawned::start(example());
    let status = app.terminate();
    assert!(status.success(), "{status:?}: {:#?}", app.log);
    app.assert_info_log(&["SIGTERM: shutting down", "stopped"]);
}

#[test]
fn settings_from_the_environment() {
    let mut cmd = example();
    cmd.env("API_KEYS", "demo-key-1,demo-key-2")
        .env("RATELIMIT_MAX_KEYS", "5000")
        .env("TRUSTED_PROXIES", "10.0.0.0/8")
        .env("RUST_LOG", "warn,axum_example=info,tower_ratelimit=info");
    let app = Spawned::start(cmd);
    let log = app.log.join("\n");
    for expected in ["api_keys=2", "max_keys=5000", "trusted_proxies=10.0.0.0/8"] {
        assert!(log.contains(expected), "{expected:?} not in\n{log}");
    }
    assert!(!log.contains("demo-key-1"), "keys are secrets: {log}");
    // Behind proxies, no connection cap per client of its own.
    let setting = |name: &str| {
        let after = log.split(&format!("{name}: ")).nth(1).unwrap_or_default();
        after.split(',').next().unwrap_or_default().to_owned()
    };
    assert_eq!(
        setting("max_connections_per_client"),
        setting("max_connections"),
        "{log}"
    );
    assert!(!setting("max_connections").is_empty(), "{log}");
    let keyed =
        "GET /api/items HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-API-Key: demo-key-2\r\n\r\n";
    assert_eq!(app.status(keyed), 200);
    let made_up = keyed.replace("demo-key-2", "demo-key-3");
    assert_eq!(app.status(&made_up), 401);
}

#[test]
fn bad_settings_are_startup_errors_naming_the_variable() {
    for (var, value) in [
        ("RATELIMIT_MAX_KEYS", "lots"),
        ("RATELIMIT_MAX_KEYS", "0"),
        ("RATELIMIT_MAX_KEYS", "-5"),
        ("API_KEYS", "good,has space"),
        ("RUST_LOG", "axum_example=loud"),
        ("MAX_CONNECTIONS", "0"),
        ("MAX_CONNECTIONS_PER_CLIENT", "lots"),
    ] {
        let mut cmd = example();
        cmd.env(var, value);
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var), "{var}={value}: {err}");
        assert!(!err.contains("listening"), "{var}={value}: {err}");
    }
    // A TLS CA that cannot be read, and a password in a bad URL.
    let mut cmd = example();
    cmd.env("REDIS_URL", "rediss://127.0.0.1:1/")
        .env("REDIS_TLS_CA", "/nonexistent/ca.pem");
    let (status, err) = run_to_exit(cmd);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("REDIS_TLS_CA") && err.contains("/nonexistent/ca.pem"),
        "{err}"
    );
    let mut cmd = example();
    cmd.env("REDIS_URL", "redis://app:s3cret@127.0.0.1:bad/");
    let (status, err) = run_to_exit(cmd);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("REDIS_URL") && !err.contains("s3cret"),
        "{err}"
    );
    let mut cmd = example();
    cmd.env("API_KEYS", "good,has space");
    assert!(
        !run_to_exit(cmd).1.contains("has space"),
        "keys are secrets"
    );
    // The admin API needs its token: without one the app does not start.
    for (addr, token) in [
        ("127.0.0.1:0", None),
        ("127.0.0.1:0", Some("short")),
        ("nowhere", Some("admin-token-0123456789")),
    ] {
        let mut cmd = example();
        cmd.env("ADMIN_ADDR", addr);
        if let Some(token) = token {
            cmd.env("ADMIN_TOKEN", token);
        }
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{addr} {token:?}: {err}");
        assert!(err.contains("ADMIN_"), "{err}");
        assert!(
            !err.contains("listening") && !err.contains("short\""),
            "{err}"
        );
    }
}

/// A policy file of its own for a test: the shipped one, edited.
fn policy_file(test: &str, edit: impl Fn(&str) -> String) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("axum-example-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ratelimit.toml");
    std::fs::write(&path, edit(axum_example::DEFAULT_POLICY)).unwrap();
    path
}

pub(crate) const ACCOUNT: &str =
    "POST /accounts HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

#[test]
fn a_bad_policy_file_at_start_exits_naming_the_file() {
    let bad = policy_file("bad", |p| {
        p.replace("sliding-log 2/1d", "sliding-log 2/1dd")
    });
    let missing = bad.with_file_name("missing.toml");
    let typo = policy_file("typo", |p| {
        p.replacen(
            r#"routes = ["POST /login"]"#,
            r#"routes = ["POST /login/"]"#,
            1,
        )
    });
    for (path, wants) in [
        (
            &typo,
            vec![r#"ratelimit.toml: limit "login-failures": route "POST /login/" is not served"#],
        ),
        (
            &bad,
            vec!["ratelimit.toml:36: limit \"accounts\": bad duration \"1dd\""],
        ),
        (&missing, vec!["missing.toml: cannot read"]),
    ] {
        let mut cmd = example();
        cmd.env("RATELIMIT_CONFIG", path);
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{err}");
        assert!(err.contains("RATELIMIT_CONFIG: "), "{err}");
        for want in wants {
            assert!(err.contains(want), "{want:?} not in {err}");
        }
        assert!(!err.contains("listening"), "{err}");
    }
    std::fs::remove_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::remove_dir_all(typo.parent().unwrap()).unwrap();
}

/// Editing a limit and sending SIGHUP applies it within 1 s, keeping the
/// quota used (2 used of a new 4 leaves 2); a bad edit is logged and the
/// running limits stay.
#[cfg(unix)]
#[test]
fn sighup_reloads_the_policy_file() {
    sighup_reloads("hup", None);
}

/// The same with the limits in Redis: the used quota carries over there.
#[cfg(unix)]
#[test]
fn sighup_reloads_the_policy_file_on_redis() {
    let Some(server) = redis_server::RedisServer::start() else {
        return;
    };
    sighup_reloads("hup-redis", Some(&server.url()));
}

#[cfg(unix)]
fn sighup_reloads(test: &str, redis_url: Option<&str>) {
    use std::time::{Duration, Instant};
    let path = policy_file(test, str::to_owned);
    let mut cmd = example();
    cmd.env("RATELIMIT_CONFIG", &path);
    if let Some(url) = redis_url {
        cmd.env("REDIS_URL", url);
    }
    let mut app = Spawned::start(cmd);
    app.assert_info_log(&["rate limits from the policy file", "ratelimit.toml"]);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 429);
    // A bad edit: logged, nothing changes.
    let text = axum_example::DEFAULT_POLICY;
    std::fs::write(
        &path,
        text.replace("sliding-log 2/1d", "sliding-log 4/1d brust 2"),
    )
    .unwrap();
    send_hup(&app);
    let line = app.wait_for("reload rejected", Duration::from_secs(5));
    let line = line.expect("a rejected reload is logged");
    assert!(
        line.contains("no option") && line.contains("brust"),
        "{line}"
    );
    assert_eq!(app.status(ACCOUNT), 429);
    // A good edit, applied soon after the signal: within 5 s, a margin a
    // busy 2-core machine meets (the reload itself takes microseconds).
    std::fs::write(&path, text.replace("sliding-log 2/1d", "sliding-log 4/1d")).unwrap();
    let sent = Instant::now();
    send_hup(&app);
    assert!(app
        .wait_for("rate limits reloaded", Duration::from_secs(5))
        .is_some());
    assert!(sent.elapsed() < Duration::from_secs(5));
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 429);
    let status = app.terminate();
    assert!(status.success(), "{status:?}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// The churn attack: with `RATELIMIT_MAX_KEYS=1000`, a flood of new client
/// addresses (3,000, each in its own /24) evicts keys at the cap, while
/// one address keeps failing logins. Eviction gives nothing back: it
/// reaches the password check 5 times, not once more.
#[test]
fn a_flood_of_new_addresses_does_not_forgive_a_brute_forcer() {
    let mut cmd = example();
    cmd.env("RATELIMIT_MAX_KEYS", "1000")
        .env("TRUSTED_PROXIES", "127.0.0.1/32");
    let app = Spawned::start(cmd);
    let login = |ip: &str| {
        let body = r#"{"username":"alice","password":"guess"}"#;
        format!(
            "POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             X-Forwarded-For: {ip}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let attacker = login("203.0.113.66");
    let (mut checked, mut flood_denied) = (0, 0);
    for i in 0..3_000u32 {
        let flood = login(&format!("198.{}.{}.1", 18 + (i >> 8), i & 255));
        // A newcomer may start as used as the evicted keys sharing its
        // cells of the sketch: limits err toward denying.
        match app.status(&flood) {
            401 => {}
            429 => flood_denied += 1,
            other => panic!("flood request {i} got {other}"),
        }
        if i % 10 == 0 {
            match app.status(&attacker) {
                401 => checked += 1,
                429 => {}
                other => panic!("attacker got {other}"),
            }
        }
    }
    eprintln!("flood requests denied: {flood_denied} of 3000");
    assert_eq!(checked, 5);
}

/// `GET path` on `127.0.0.1:port`: the status and the body.
pub(crate) fn get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// The samples of a Prometheus text exposition, by `name{labels}`; every
/// line that is not a comment must be `name[{labels}] value`.
pub(crate) fn samples(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l:?}"));
            let name_end = series.find('{').unwrap_or(series.len());
            let name = &series[..name_end];
            assert!(
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'),
                "bad metric name in {l:?}"
            );
            assert!(name_end == series.len() || series.ends_with('}'), "{l:?}");
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {l:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

/// `METRICS_ADDR` serves Prometheus text at `GET /metrics`: after three
/// account creations from one client, 2 admitted and 1 limited for
/// `accounts`.
#[test]
fn metrics_count_each_limit() {
    let port = ratelimit_test_support::redis_server::free_port();
    let mut cmd = example();
    cmd.env("METRICS_ADDR", format!("127.0.0.1:{port}"));
    let app = Spawned::start(cmd);
    assert!(app.log.join("\n").contains("GET /metrics"));
    for want in [201, 201, 429] {
        assert_eq!(app.status(ACCOUNT), want);
    }
    let (status, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    let samples = samples(&body);
    assert_eq!(
        samples.get("ratelimit_allowed_total{limit=\"accounts\"}"),
        Some(&2.0),
        "{body}"
    );
    assert_eq!(
        samples.get("ratelimit_limited_total{limit=\"accounts\"}"),
        Some(&1.0),
        "{body}"
    );
}

/// Metrics are off unless `METRICS_ADDR` is set; a bad value is a startup
/// error naming it, as is `LOG_FORMAT` other than text or json.
#[test]
fn metrics_and_log_format_settings_are_checked() {
    for (var, value) in [("METRICS_ADDR", "localhost"), ("LOG_FORMAT", "xml")] {
        let mut cmd = example();
        cmd.env(var, value);
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var), "{var}={value}: {err}");
    }
    let app = Spawned::start(example());
    assert!(!app.log.join("\n").contains("/metrics"));
}

/// `LOG_FORMAT=json`: every line is one JSON object with a level and a
/// message.
#[test]
fn json_logs_are_one_object_per_line() {
    let mut cmd = example();
    cmd.env("LOG_FORMAT", "json");
    let mut app = Spawned::start(cmd);
    assert_eq!(app.status(ACCOUNT), 201);
    app.terminate();
    assert!(app.log.len() >= 3, "{:#?}", app.log);
    for line in &app.log {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{line}"
        );
    }
}

/// `GET /ready` in memory: 200, every store in this instance's memory.
#[test]
fn ready_in_memory() {
    let app = Spawned::start(example());
    let (status, body) = get(app.addr.port(), "/ready");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "ready");
    assert_eq!(v["store"], "memory");
}

/// Shrink-then-grow reload cycles (`2/1d` -> `1/1d` -> `2/1d`) and 100
/// SIGHUPs of an unchanged file grant nothing: a client that used its 2
/// accounts stays refused, in memory and on Redis.
#[cfg(unix)]
#[test]
fn reload_cycles_and_unchanged_sighups_grant_nothing() {
    reload_cycles("cycles", None);
    if let Some(server) = redis_server::RedisServer::start() {
        reload_cycles("cycles-redis", Some(&server.url()));
    }
}

#[cfg(unix)]
fn reload_cycles(test: &str, redis_url: Option<&str>) {
    let path = policy_file(test, str::to_owned);
    let mut cmd = example();
    cmd.env("RATELIMIT_CONFIG", &path);
    if let Some(url) = redis_url {
        cmd.env("REDIS_URL", url);
    }
    let mut app = Spawned::start(cmd);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 429);
    let text = axum_example::DEFAULT_POLICY;
    for cycle in 0..5 {
        std::fs::write(&path, text.replace("sliding-log 2/1d", "sliding-log 1/1d")).unwrap();
        hup(&mut app, "rate limits reloaded");
        assert_eq!(app.status(ACCOUNT), 429, "cycle {cycle}, shrunk");
        std::fs::write(&path, text).unwrap();
        hup(&mut app, "rate limits reloaded");
        assert_eq!(app.status(ACCOUNT), 429, "cycle {cycle}, grown back");
    }
    for n in 0..100 {
        hup(&mut app, "no change");
        if n % 25 == 0 {
            assert_eq!(app.status(ACCOUNT), 429, "after {n} unchanged reloads");
        }
    }
    assert_eq!(app.status(ACCOUNT), 429);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// Sends the app SIGHUP.
fn send_hup(app: &Spawned) {
    let pid = app.id().to_string();
    let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert!(sent.success());
}

/// Sends the app SIGHUP and waits (up to 10 s) for a log line with `wants`.
pub(crate) fn hup(app: &mut Spawned, wants: &str) {
    send_hup(app);
    app.wait_for(wants, std::time::Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no {wants:?} after SIGHUP; log: {:#?}", app.log));
}
