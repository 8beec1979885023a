//! A reload in process: kept limits keep what their keys used (through two reloads), a bad file changes nothing.

use crate::harness::Harness;
use ratelimit_core::ManualClock;
use ratelimit_server::Config;
use ratelimit_test_support::RedisServer;
use std::sync::Arc;

/// Two limits: `login` at `rate` a day, `per-ip` 5 a day (never changed).
fn policy(store: &str, rate: &str) -> String {
    format!(
        r#"
{store}
[[limit]]
name = "login"
domain = "edge"
algorithm = "{rate}"
descriptors = [{{ key = "path", value = "/login" }}, {{ key = "remote_address" }}]

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 5/1d"
descriptors = [{{ key = "remote_address" }}]
"#
    )
}

fn config(text: &str) -> Config {
    Config::parse(text, "reload.toml", |_| None).expect("a good file")
}

/// `POST /check` of `limit` for `key`: the status.
async fn check(h: &Harness, limit: &str, key: &str) -> u16 {
    let body = format!(r#"{{"limit":"{limit}","key":"{key}"}}"#);
    h.http("POST", "/check", &[], &body).await.status
}

/// What a peek of `limit` for `key` says is left.
async fn remaining(h: &Harness, limit: &str, key: &str) -> u64 {
    let body = format!(r#"{{"limit":"{limit}","key":"{key}","cost":0}}"#);
    let a = h.http("POST", "/check", &[], &body).await;
    let after = a.body.split("\"remaining\":").nth(1).expect("a remaining");
    after[..after.find(',').unwrap()].parse().unwrap()
}

/// 3 used of `3/1d`, then `2/1d`, then `3/1d` again: 0 left every time
/// (a change frees nothing); the unchanged limit keeps its 1 used of 5.
async fn two_reloads_free_nothing(store: &str) {
    let clock = Arc::new(ManualClock::new());
    let h = Harness::start_config(config(&policy(store, "gcra 3/1d")), clock).await;
    for _ in 0..3 {
        assert_eq!(check(&h, "login", "10.1.0.1").await, 200);
    }
    assert_eq!(check(&h, "login", "10.1.0.1").await, 429);
    assert_eq!(check(&h, "per-ip", "10.1.0.1").await, 200);
    for rate in ["gcra 2/1d", "gcra 3/1d"] {
        let reloaded = h.reload(config(&policy(store, rate))).expect("reloaded");
        assert_eq!(reloaded.changed.len(), 1, "{reloaded:?}");
        assert_eq!(reloaded.unchanged, 1, "{reloaded:?}");
        assert_eq!(remaining(&h, "login", "10.1.0.1").await, 0, "after {rate}");
        assert_eq!(check(&h, "login", "10.1.0.1").await, 429, "after {rate}");
        assert_eq!(remaining(&h, "per-ip", "10.1.0.1").await, 4, "after {rate}");
    }
    // A raise past what was used frees only the difference.
    h.reload(config(&policy(store, "gcra 5/1d"))).unwrap();
    assert_eq!(remaining(&h, "login", "10.1.0.1").await, 2);
    h.running.stop().await;
}

#[tokio::test]
async fn two_reloads_free_nothing_in_memory() {
    two_reloads_free_nothing("").await;
}

#[tokio::test]
async fn two_reloads_free_nothing_on_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let store = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n",
        redis.url()
    );
    two_reloads_free_nothing(&store).await;
}

#[tokio::test]
async fn a_bad_file_is_refused_naming_it_and_the_running_limits_stay() {
    let dir = std::env::temp_dir().join(format!("ratelimitd-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("limits.toml");
    let server = "[server]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\n";
    let good = policy(server, "gcra 1/1d");
    std::fs::write(&path, &good).unwrap();
    let h = Harness::start_config(Config::load(&path).unwrap(), Arc::new(ManualClock::new())).await;
    assert_eq!(check(&h, "login", "10.1.0.2").await, 200);
    // A bad algorithm: refused, naming the file, the line and the limit.
    std::fs::write(&path, good.replace("gcra 1/1d", "gcra 9/1q")).unwrap();
    let err = h.state.reload_file(&path).unwrap_err().to_string();
    let want = format!(
        "{}:6: limit \"login\": algorithm = \"gcra 9/1q\"",
        path.display()
    );
    assert!(err.starts_with(&want), "{err}");
    // A change of what needs a restart: refused too.
    let moved = format!(
        "[store]\nkind = \"memory\"\nmax-keys = 10\n{}",
        policy("", "gcra 1/1d")
    );
    let err = h.reload(config(&moved)).unwrap_err().to_string();
    assert!(
        err.contains("[store] changed: that needs a restart"),
        "{err}"
    );
    // The old limits still run: 1 a day, used.
    assert_eq!(check(&h, "login", "10.1.0.2").await, 429);
    assert_eq!(remaining(&h, "login", "10.1.0.2").await, 0);
    let _ = std::fs::remove_dir_all(&dir);
    h.running.stop().await;
}

#[tokio::test]
async fn a_reload_adds_removes_and_retunes_limits() {
    let h = Harness::start_config(
        config(&policy("", "gcra 1/1d")),
        Arc::new(ManualClock::new()),
    )
    .await;
    assert_eq!(check(&h, "per-ip", "10.1.0.3").await, 200);
    // per-ip goes, user comes, login turns shadow (a dry run).
    let text = r#"
[[limit]]
name = "login"
domain = "edge"
algorithm = "gcra 1/1d"
shadow = true
descriptors = [{ key = "path", value = "/login" }, { key = "remote_address" }]

[[limit]]
name = "user"
domain = "edge"
algorithm = "fixed-window 1/1d"
descriptors = [{ key = "user" }]
"#;
    let r = h.reload(config(text)).unwrap();
    assert_eq!(
        (r.added, r.removed),
        (vec!["user".to_owned()], vec!["per-ip".to_owned()])
    );
    assert_eq!(r.changed[0].from, r.changed[0].to);
    assert_eq!(check(&h, "per-ip", "10.1.0.3").await, 404);
    assert_eq!(check(&h, "user", "u1").await, 200);
    assert_eq!(check(&h, "user", "u1").await, 429);
    for _ in 0..3 {
        assert_eq!(
            check(&h, "login", "10.1.0.3").await,
            200,
            "a shadow refuses nothing"
        );
    }
    h.running.stop().await;
}

#[tokio::test]
async fn a_redis_store_refuses_a_reload_to_what_its_scripts_cannot_decide() {
    // Nothing needs to answer there: the check builds no connection.
    let store = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:1/\"\n";
    let h = Harness::start_config(
        config(&policy(store, "gcra 3/1d")),
        Arc::new(ManualClock::new()),
    )
    .await;
    let err = h
        .reload(config(&policy(store, "fixed-window 3/year")))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("reload.toml:6: limit \"login\": its store:"),
        "{err}"
    );
    // A sentence, with the algorithm as written: no Rust structure.
    assert!(
        err.contains("the redis store: fixed-window 3/year: a calendar year") && !err.contains('{'),
        "{err}"
    );
    assert_eq!(
        h.state
            .limits()
            .named("login")
            .unwrap()
            .config
            .algorithm
            .unwrap()
            .to_string(),
        "gcra 3/1d"
    );
    h.running.stop().await;
}
