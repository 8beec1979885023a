//! `axum-example` as a process: it logs by default, and refuses bad
//! settings at startup naming the variable.

use ratelimit_test_support::redis_server;
use ratelimit_test_support::spawned::{run_to_exit, Spawned};
use std::process::Command;

/// The binary on a free port with none of the settings from the
/// environment of the test.
fn example() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_axum-example"));
    for var in [
        "API_KEYS",
        "REDIS_URL",
        "RATELIMIT_MAX_KEYS",
        "RATELIMIT_CONFIG",
        "RUST_LOG",
        "TRUSTED_PROXIES",
        "TRUSTED_PROXY_HEADER",
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
        .env("RUST_LOG", "warn,axum_example=info");
    let app = Spawned::start(cmd);
    let log = app.log.join("\n");
    for expected in ["api_keys=2", "max_keys=5000", "trusted_proxies=10.0.0.0/8"] {
        assert!(log.contains(expected), "{expected:?} not in\n{log}");
    }
    assert!(!log.contains("demo-key-1"), "keys are secrets: {log}");
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
    ] {
        let mut cmd = example();
        cmd.env(var, value);
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var), "{var}={value}: {err}");
        assert!(!err.contains("listening"), "{var}={value}: {err}");
    }
    let mut cmd = example();
    cmd.env("API_KEYS", "good,has space");
    assert!(
        !run_to_exit(cmd).1.contains("has space"),
        "keys are secrets"
    );
}

/// A policy file of its own for a test: the shipped one, edited.
fn policy_file(test: &str, edit: impl Fn(&str) -> String) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("axum-example-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ratelimit.toml");
    std::fs::write(&path, edit(axum_example::DEFAULT_POLICY)).unwrap();
    path
}

const ACCOUNT: &str =
    "POST /accounts HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

#[test]
fn a_bad_policy_file_at_start_exits_naming_the_file() {
    let bad = policy_file("bad", |p| {
        p.replace("sliding-log 2/1d", "sliding-log 2/1dd")
    });
    let missing = bad.with_file_name("missing.toml");
    for (path, wants) in [
        (
            &bad,
            vec!["ratelimit.toml:31: limit \"accounts\": bad duration \"1dd\""],
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
    let hup = |app: &Spawned| {
        let pid = app.id().to_string();
        let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(sent.success());
    };
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
    hup(&app);
    let line = app.wait_for("reload rejected", Duration::from_secs(5));
    let line = line.expect("a rejected reload is logged");
    assert!(
        line.contains("no option") && line.contains("brust"),
        "{line}"
    );
    assert_eq!(app.status(ACCOUNT), 429);
    // A good edit, applied within 1 s of the signal.
    std::fs::write(&path, text.replace("sliding-log 2/1d", "sliding-log 4/1d")).unwrap();
    let sent = Instant::now();
    hup(&app);
    assert!(app
        .wait_for("rate limits reloaded", Duration::from_secs(1))
        .is_some());
    assert!(sent.elapsed() < Duration::from_secs(1));
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 201);
    assert_eq!(app.status(ACCOUNT), 429);
    let status = app.terminate();
    assert!(status.success(), "{status:?}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
