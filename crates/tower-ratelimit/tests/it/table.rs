//! The policy table: a TOML file turned into layers of a router, and every
//! validation error naming the file, the line and the entry.

use crate::common::get_from;
use axum::http::{Method, Request, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use ratelimit_core::{LiveAlgorithm, ManualClock, MemoryStore};
use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::table::{PolicyHandle, PolicyKey, PolicyOptions, PolicyTable, StoreSpec};

const TABLE: &str = r#"
[[limit]]
name = "tickets"
algorithm = "gcra 1/5m"
key = "bearer"
routes = ["POST /tickets"]

[[limit]]
name = "login-failures"
algorithm = { algorithm = "sliding-log", limit = 2, period = "1h" }
key = "peer-ip"
routes = ["POST /login"]
count = [401]

[[limit]]
name = "items"
algorithm = "fixed-window 3/1m"
key = "peer-ip+route"
routes = ["/items/{id}"]
cost = 1
headers = "none"

[[limit]]
name = "everyone"
algorithm = "gcra 100/1s"
key = "global"
mode = "dry-run"
"#;

fn app(table: &PolicyTable, clock: &ManualClock) -> Router {
    app_and_handle(table, clock).0
}

fn app_and_handle(table: &PolicyTable, clock: &ManualClock) -> (Router, PolicyHandle) {
    let router = Router::new()
        .route(
            "/tickets",
            post(|| async { "ticket" }).get(|| async { "list" }),
        )
        .route("/login", post(|| async { StatusCode::UNAUTHORIZED }))
        .route("/items/{id}", get(|| async { "item" }))
        .route("/other", get(|| async { "other" }));
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    table
        .apply(router, &options, |spec: &StoreSpec| {
            Ok::<_, Infallible>(MemoryStore::<LiveAlgorithm, PolicyKey>::new(
                spec.live().clone(),
            ))
        })
        .unwrap()
}

async fn status(app: &Router, method: Method, uri: &str, headers: &[(&str, &[u8])]) -> StatusCode {
    let mut req: Request<_> = get_from("10.0.0.1:1", uri, headers);
    *req.method_mut() = method;
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn a_table_limits_each_route_as_written() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let names: Vec<_> = table.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["tickets", "login-failures", "items", "everyone"]);
    let clock = ManualClock::new();
    let app = app(&table, &clock);
    let alice: &[(&str, &[u8])] = &[("authorization", b"Bearer alice")];
    // 1 ticket per 5 minutes per bearer; none: 401; GET is not limited.
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&app, Method::POST, "/tickets", &[]).await,
        StatusCode::UNAUTHORIZED
    );
    for _ in 0..3 {
        assert_eq!(
            status(&app, Method::GET, "/tickets", &[]).await,
            StatusCode::OK
        );
    }
    // 2 failed logins (401 counts) per hour.
    for _ in 0..2 {
        assert_eq!(
            status(&app, Method::POST, "/login", &[]).await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        status(&app, Method::POST, "/login", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // 3 per minute per (peer, route): /items/1 and /items/2 share the route.
    for uri in ["/items/1", "/items/2", "/items/3"] {
        assert_eq!(status(&app, Method::GET, uri, &[]).await, StatusCode::OK);
    }
    assert_eq!(
        status(&app, Method::GET, "/items/4", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The dry-run global limit never rejects; unlisted routes pass.
    for _ in 0..150 {
        assert_eq!(
            status(&app, Method::GET, "/other", &[]).await,
            StatusCode::OK
        );
    }
    clock.advance(std::time::Duration::from_secs(300));
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::OK
    );
}

/// A monthly limit from the table resets on the first of the next UTC
/// month (2025-01-31 23:00 to 2025-02-01 00:00), to the nanosecond.
#[tokio::test]
async fn a_monthly_limit_resets_on_the_first() {
    let table = PolicyTable::from_toml(
        "[[limit]]\nname = \"monthly\"\nalgorithm = \"fixed-window 1/month\"\nkey = \"peer-ip\"\nroutes = [\"GET /items/{id}\"]\n",
        None,
    )
    .unwrap();
    let feb_1 = 1_738_368_000 * 1_000_000_000; // 2025-02-01 00:00 UTC
    let clock = ManualClock::new();
    clock.set_nanos(feb_1 - 3_600 * 1_000_000_000);
    let app = app(&table, &clock);
    assert_eq!(
        status(&app, Method::GET, "/items/1", &[]).await,
        StatusCode::OK
    );
    clock.set_nanos(feb_1 - 1);
    assert_eq!(
        status(&app, Method::GET, "/items/1", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.set_nanos(feb_1);
    assert_eq!(
        status(&app, Method::GET, "/items/1", &[]).await,
        StatusCode::OK
    );
}

/// axum answers HEAD with the GET handler: a GET route's limit covers
/// HEAD, and HEAD uses up the same quota.
#[tokio::test]
async fn a_get_route_covers_head() {
    let table = PolicyTable::from_toml(
        "[[limit]]\nname = \"list\"\nalgorithm = \"fixed-window 2/1m\"\nkey = \"peer-ip\"\nroutes = [\"GET /tickets\"]\n",
        None,
    )
    .unwrap();
    let app = app(&table, &ManualClock::new());
    assert_eq!(
        status(&app, Method::HEAD, "/tickets", &[]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, Method::GET, "/tickets", &[]).await,
        StatusCode::OK
    );
    for method in [Method::HEAD, Method::GET] {
        assert_eq!(
            status(&app, method, "/tickets", &[]).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    // Other methods are not covered.
    assert_eq!(
        status(&app, Method::POST, "/tickets", &[]).await,
        StatusCode::OK
    );
}

#[test]
fn every_validation_error_names_file_line_and_entry() {
    let file = Some(Path::new("limits.toml"));
    let entry =
        |name: &str, body: &str| format!("# a comment\n[[limit]]\nname = \"{name}\"\n{body}\n");
    let base = "algorithm = \"gcra 1/1s\"\nkey = \"global\"";
    let ip = "algorithm = \"gcra 1/1s\"\nkey = \"client-ip\"";
    let cases: Vec<(String, &str)> =
        vec![
        (
            entry("a", "algorithm = \"gcra 1/1s brust 2\"\nkey = \"global\""),
            "limits.toml:4: limit \"a\": gcra has no option \"brust\"",
        ),
        (
            entry("b", "algorithm = \"gcra 0/1s\"\nkey = \"global\""),
            "limits.toml:4: limit \"b\": limit must be at least 1",
        ),
        (
            entry("b2", "algorithm = \"fixed-window 5/1mo\"\nkey = \"global\""),
            "limits.toml:4: limit \"b2\": bad period \"1mo\": a calendar period is written week, month or year",
        ),
        (
            entry("b3", "algorithm = \"gcra 5/month\"\nkey = \"global\""),
            "limits.toml:4: limit \"b3\": gcra cannot take the calendar period \"month\"",
        ),
        (
            entry("c", "algorithm = \"gcra 1/1s\"\nkey = \"baerer\""),
            "limits.toml:5: limit \"c\": unknown key \"baerer\"",
        ),
        (
            entry("d", "algorithm = \"gcra 1/1s\"\nkey = \"header:bad name\""),
            "limits.toml:5: limit \"d\": bad header name \"bad name\"",
        ),
        (
            entry("e", &format!("{base}\nroutes = [\"tickets\"]")),
            "limits.toml:6: limit \"e\": bad route \"tickets\"",
        ),
        (
            entry("f", &format!("{base}\nroutes = [\"P@ST /x\"]")),
            "limits.toml:6: limit \"f\": bad method \"P@ST\"",
        ),
        (
            entry("f2", &format!("{base}\nroutes = [\"post /x\"]")),
            "limits.toml:6: limit \"f2\": bad method \"post\" in route \"post /x\": methods are \
             case-sensitive, write \"POST\"",
        ),
        (
            entry("o1", &format!("{ip}\noverrides = {{ \"2001:db8::/48\" = \"gcra 9/1s\" }}")),
            "limits.toml:2: limit \"o1\": override key \"2001:db8::/48\": this limit keys \
             addresses by /64 networks",
        ),
        (
            entry("o2", &format!("{ip}\noverrides = {{ \"nonsense\" = \"gcra 9/1s\" }}")),
            "limits.toml:2: limit \"o2\": override key \"nonsense\": not an IP address",
        ),
        (
            entry(
                "o3",
                &format!(
                    "{ip}\noverrides = {{ \"10.0.0.7\" = \"gcra 9/1s\", \
                     \"10.0.0.7/32\" = \"gcra 8/1s\" }}"
                ),
            ),
            "limits.toml:2: limit \"o3\": two overrides name one key",
        ),
        (
            entry(
                "o4",
                "algorithm = \"gcra 5/1s\"\nkey = \"api-key\"\n\
                 overrides = { \"sekrit-key \" = \"gcra 2/1s\" }",
            ),
            "limits.toml:2: limit \"o4\": an override's key (11 characters long) is not one",
        ),
        (
            entry("g", &format!("{base}\ncount = [42]")),
            "limits.toml:6: limit \"g\": bad status 42",
        ),
        (
            entry("h", &format!("{base}\nmode = \"enforced\"")),
            "limits.toml:6: limit \"h\": bad mode \"enforced\"",
        ),
        (
            entry("i", &format!("{base}\nmode = \"shape\"")),
            "limits.toml:2: limit \"i\": mode \"shape\" needs a leaky-bucket",
        ),
        (
            entry("j", &format!("{base}\nheaders = \"all\"")),
            "limits.toml:6: limit \"j\": bad headers \"all\"",
        ),
        (
            entry("k", &format!("{base}\non-key-error = \"ignore\"")),
            "limits.toml:6: limit \"k\": bad on-key-error \"ignore\"",
        ),
        (
            entry("l", &format!("{base}\ncots = 2")),
            "limits.toml:6: limit \"l\": unknown field `cots`",
        ),
        (
            entry("m", &format!("{base}\ncost = -1")),
            "limits.toml:6: limit \"m\": invalid value",
        ),
        (
            entry("n", "key = \"global\""),
            "limits.toml:2: limit \"n\": missing field `algorithm`",
        ),
        (
            entry("bad name", base),
            "limits.toml:2: limit \"bad name\": a name is 1 to 64",
        ),
        (
            format!("{}{}", entry("o", base), entry("o", base)),
            "limits.toml:7: limit \"o\": the name is used twice",
        ),
        (
            entry("r", &format!("{base}\ncost = 0")),
            "limits.toml:2: limit \"r\": cost = 0 makes every request a peek",
        ),
        (
            entry(
                "s",
                "algorithm = \"sliding-log 3/1h\"\nkey = \"global\"\ncost = 4",
            ),
            "limits.toml:2: limit \"s\": cost = 4 is above the capacity 3 of the algorithm",
        ),
        (
            entry(
                "t",
                "algorithm = \"gcra 5/1s\"\nkey = \"api-key\"\ncost = 4\n\
                 overrides = { \"secret-key\" = \"gcra 2/1s\" }",
            ),
            "limits.toml:2: limit \"t\": cost = 4 is above the capacity 2 of an override",
        ),
        (
            entry("u", &format!("{base}\ncount = []")),
            "limits.toml:2: limit \"u\": count = [] counts no response",
        ),
        (
            entry("v", &format!("{base}\nroutes = []")),
            "limits.toml:6: limit \"v\": routes = [] would match no route",
        ),
        (
            "[[limits]]\nname = \"p\"\n".to_owned(),
            "limits.toml:1: unknown field `limits`",
        ),
        (
            "[[limit]]\nname = \"q\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\ncost = \n"
                .to_owned(),
            "limits.toml:5: limit \"q\": ",
        ),
    ];
    for (text, want) in cases {
        let err = PolicyTable::from_toml(&text, file).unwrap_err().to_string();
        assert!(err.starts_with(want), "{text}\n=> {err}\n(wanted {want})");
    }
}

#[test]
fn an_unreadable_file_is_named() {
    let err = PolicyTable::load("/nonexistent/limits.toml").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/limits.toml: cannot read"),
        "{err}"
    );
}

const LIVE: &str = r#"
[[limit]]
name = "tickets"
algorithm = "gcra 3/1h"
key = "bearer"
routes = ["POST /tickets"]
overrides = { "vip" = "gcra 10/1h" }
"#;

async fn tickets(app: &Router, token: &str, n: usize) -> usize {
    let auth = format!("Bearer {token}");
    let headers: &[(&str, &[u8])] = &[("authorization", auth.as_bytes())];
    let mut ok = 0;
    for _ in 0..n {
        if status(app, Method::POST, "/tickets", headers).await == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

#[tokio::test]
async fn a_reload_keeps_used_quota_and_overrides_follow_the_file() {
    let table = PolicyTable::from_toml(LIVE, None).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    assert_eq!(tickets(&app, "alice", 2).await, 2);
    assert_eq!(tickets(&app, "vip", 5).await, 5);
    // 2 used of a new 4 leaves 2; the override goes: vip's 5 used of 4.
    let edited = LIVE
        .replace("gcra 3/1h", "gcra 4/1h")
        .replace("overrides = { \"vip\" = \"gcra 10/1h\" }", "");
    let edited_table = PolicyTable::from_toml(&edited, None).unwrap();
    let changes = handle.reload(&edited_table).unwrap();
    assert_eq!(handle.reloads(), 1);
    // The reload says what it changed, and the same table again changes
    // nothing.
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].limit, "tickets");
    assert_eq!(changes[0].from.to_string(), "gcra 3/1h");
    assert_eq!(changes[0].to.to_string(), "gcra 4/1h");
    assert_eq!(changes[0].overrides, "1 -> 0");
    assert_eq!(handle.reload(&edited_table).unwrap(), vec![]);
    assert_eq!(tickets(&app, "alice", 5).await, 2);
    assert_eq!(tickets(&app, "vip", 5).await, 0);
    // An override added at run time, through the handle.
    let live = handle.limit("tickets").unwrap();
    live.set_override(
        "bob",
        "gcra 6/1h".parse::<ratelimit_core::AnyAlgorithm>().unwrap(),
    )
    .unwrap();
    assert_eq!(tickets(&app, "bob", 10).await, 6);
    assert!(live.remove_override("bob"));
    assert_eq!(tickets(&app, "bob", 1).await, 0);
    // One set through the table's handle outlives a reload, which reports
    // no change for it (the file did not change).
    handle
        .set_override("tickets", "carol", "gcra 8/1h".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(handle.reload(&edited_table).unwrap(), vec![]);
    assert_eq!(tickets(&app, "carol", 10).await, 8);
}

/// The attack of issue 21: reloads that lower a limit and raise it back
/// (`sliding-log 3/1d` -> `2/1d` -> `3/1d`, the override too) grant
/// nothing, and 100 reloads of the unchanged file make no new version
/// and change nothing for any key, checked between them or idle.
#[tokio::test]
async fn reloads_that_shrink_and_grow_or_change_nothing_grant_nothing() {
    let text = LIVE
        .replace("gcra 3/1h", "sliding-log 3/1d")
        .replace("gcra 10/1h", "sliding-log 10/1d");
    let table = PolicyTable::from_toml(&text, None).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    for (token, used) in [("alice", 3), ("carol", 3), ("vip", 10)] {
        assert_eq!(tickets(&app, token, used + 1).await, used, "{token}");
    }
    let live = handle.limit("tickets").unwrap();
    let (version, _) = live.algorithm_for("alice");
    for _ in 0..100 {
        handle.reload(&table).unwrap();
        assert_eq!(tickets(&app, "alice", 1).await, 0);
    }
    assert_eq!(live.algorithm_for("alice").0, version, "no new version");
    let smaller = text
        .replace("sliding-log 3/1d", "sliding-log 2/1d")
        .replace("sliding-log 10/1d", "sliding-log 5/1d");
    let smaller = PolicyTable::from_toml(&smaller, None).unwrap();
    for cycle in 0..20 {
        for t in [&smaller, &table] {
            handle.reload(t).unwrap();
            for token in ["alice", "vip"] {
                assert_eq!(tickets(&app, token, 1).await, 0, "{token}, cycle {cycle}");
            }
        }
    }
    // Idle through all of it: still used up.
    assert_eq!(tickets(&app, "carol", 1).await, 0);
    assert_eq!(tickets(&app, "dave", 4).await, 3);
}

#[tokio::test]
async fn a_reload_that_needs_a_restart_is_rejected_whole() {
    let table = PolicyTable::from_toml(LIVE, None).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    for (edited, want) in [
        (
            LIVE.replace("key = \"bearer\"", "key = \"header:x-user\""),
            "limit \"tickets\": changing its key needs a restart",
        ),
        (
            LIVE.replace("POST /tickets", "GET /tickets"),
            "limit \"tickets\": changing its routes needs a restart",
        ),
        (
            LIVE.replace("name = \"tickets\"", "name = \"tix\""),
            "limit \"tix\": where \"tickets\" runs: renaming",
        ),
        (
            format!(
                "{LIVE}\n[[limit]]\nname = \"b\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\n"
            ),
            "limit \"b\": added: adding a limit needs a restart",
        ),
    ] {
        let err = handle
            .reload(&PolicyTable::from_toml(&edited, None).unwrap())
            .unwrap_err();
        assert!(err.to_string().starts_with(want), "{err}");
    }
    assert_eq!(handle.reloads(), 0);
    assert_eq!(tickets(&app, "alice", 5).await, 3);
}

#[tokio::test]
async fn a_reload_removing_a_limit_is_rejected_naming_it() {
    let two =
        format!("{LIVE}\n[[limit]]\nname = \"b\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\n");
    let table = PolicyTable::from_toml(&two, None).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    let err = handle
        .reload(&PolicyTable::from_toml(LIVE, None).unwrap())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "limit \"b\": removed: removing a limit needs a restart"
    );
    assert_eq!(handle.reloads(), 0);
    assert_eq!(handle.limit("b").unwrap().get().to_string(), "gcra 1/1s");
    // "b" (1 a second for everyone, on every route) still runs.
    assert_eq!(tickets(&app, "alice", 5).await, 1);
}

/// A file of its own for a test.
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tower-ratelimit-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("limits.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(start_paused = true)]
async fn the_file_is_watched_and_a_bad_file_keeps_the_running_limits() {
    let path = temp_file("watch", LIVE);
    let table = PolicyTable::load(&path).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    let handle = Arc::new(handle);
    let poll = std::time::Duration::from_millis(200);
    handle.watch(&path, poll);
    assert_eq!(tickets(&app, "alice", 1).await, 1);
    // A bad file: rejected, nothing changes.
    std::fs::write(&path, LIVE.replace("gcra 3/1h", "gcra 3/1h brust 2")).unwrap();
    for _ in 0..5 {
        tokio::time::sleep(poll).await;
    }
    // (Not counting reloads: another test's SIGHUP reaches this process.)
    let live = handle.limit("tickets").unwrap();
    assert_eq!(live.get().to_string(), "gcra 3/1h");
    let err = handle.reload_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("limits.toml:4: limit \"tickets\": gcra has no option \"brust\""),
        "{err}"
    );
    assert_eq!(tickets(&app, "alice", 5).await, 2);
    // A good one, applied within a few polls (debounced by one).
    std::fs::write(&path, LIVE.replace("gcra 3/1h", "gcra 5/1h")).unwrap();
    for _ in 0..5 {
        tokio::time::sleep(poll).await;
    }
    assert_eq!(live.get().to_string(), "gcra 5/1h");
    assert_eq!(tickets(&app, "alice", 5).await, 2);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads() {
    let path = temp_file("hup", LIVE);
    let table = PolicyTable::load(&path).unwrap();
    let clock = ManualClock::new();
    let (app, handle) = app_and_handle(&table, &clock);
    let handle = Arc::new(handle);
    // A poll so long that only the signal can reload.
    handle.watch(&path, std::time::Duration::from_secs(3600));
    std::fs::write(&path, LIVE.replace("gcra 3/1h", "gcra 1/1h")).unwrap();
    let pid = std::process::id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while handle.reloads() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("SIGHUP reloads within 10 s");
    assert_eq!(tickets(&app, "alice", 3).await, 1);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn tiers_tell_anonymous_from_authenticated_clients() {
    let table = PolicyTable::from_toml(
        r#"
        [[limit]]
        name = "keyed"
        algorithm = "gcra 5/1h"
        key = "api-key"
        tier = "authenticated"

        [[limit]]
        name = "anonymous"
        algorithm = "gcra 2/1h"
        key = "peer-ip"
        tier = "anonymous"
        "#,
        None,
    )
    .unwrap();
    let router = Router::new().route("/", get(|| async { "ok" }));
    let options = PolicyOptions {
        clock: Some(Arc::new(ManualClock::new())),
        // Only the key "good" is known; an unknown key counts as anonymous.
        authenticated: Some(Arc::new(|req| {
            req.headers.get("x-api-key").is_some_and(|v| v == "good")
        })),
        ..PolicyOptions::default()
    };
    let (app, _) = table
        .apply(router, &options, |spec: &StoreSpec| {
            Ok::<_, Infallible>(MemoryStore::<LiveAlgorithm, PolicyKey>::new(
                spec.live().clone(),
            ))
        })
        .unwrap();
    let count = |headers: &'static [(&'static str, &'static [u8])]| {
        let app = app.clone();
        async move {
            let mut ok = 0;
            for _ in 0..10 {
                if status(&app, Method::GET, "/", headers).await == StatusCode::OK {
                    ok += 1;
                }
            }
            ok
        }
    };
    assert_eq!(count(&[("x-api-key", b"good")]).await, 5);
    assert_eq!(count(&[("x-api-key", b"unknown")]).await, 2);
    assert_eq!(count(&[]).await, 0, "the same IP, anonymous");
    let err = PolicyTable::from_toml(
        "[[limit]]\nname = \"t\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\ntier = \"gold\"\n",
        Some(Path::new("l.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("l.toml:5: limit \"t\": unknown variant `gold`"),
        "{err}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: 512,
        failure_persistence: None,
        ..Default::default()
    })]

    /// Edits nobody has seen: a table with a random slice cut out and
    /// random text put in is read or rejected, never a panic; an error
    /// names a line inside the text.
    #[test]
    fn any_edit_is_read_or_rejected_cleanly(
        cut in 0usize..TABLE.len(),
        len in 0usize..12,
        insert in "\\PC{0,6}",
    ) {
        let mut text = TABLE.to_owned();
        let cut = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        let end = (cut + len).min(text.len());
        let end = (end..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
        text.replace_range(cut..end, &insert);
        match PolicyTable::from_toml(&text, Some(Path::new("t.toml"))) {
            Ok(table) => proptest::prop_assert!(table.entries().len() <= 4),
            Err(e) => {
                let lines = text.lines().count().max(1) + 1;
                proptest::prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= lines), "{e}");
                proptest::prop_assert!(e.to_string().starts_with("t.toml"), "{e}");
            }
        }
    }
}

#[tokio::test]
async fn app_defined_keys() {
    use tower_ratelimit::key::{HeaderKey, KeyError};
    let table = PolicyTable::from_toml(
        "[[limit]]\nname = \"per-user\"\nalgorithm = \"gcra 2/1h\"\nkey = \"app:user\"\n",
        None,
    )
    .unwrap();
    let store = |spec: &StoreSpec| {
        Ok::<_, Infallible>(MemoryStore::<LiveAlgorithm, PolicyKey>::new(
            spec.live().clone(),
        ))
    };
    let router = || Router::new().route("/", get(|| async { "ok" }));
    // Not defined by the app: an error naming the entry.
    let err = table
        .apply(router(), &PolicyOptions::default(), store)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "limit \"per-user\": unknown key \"app:user\": the app defines none"
    );
    let mut options = PolicyOptions {
        clock: Some(Arc::new(ManualClock::new())),
        ..PolicyOptions::default()
    };
    options.app_keys.insert(
        "user".to_owned(),
        Arc::new(|req| {
            req.headers
                .get("x-user")
                .map(|v| PolicyKey::Text(HeaderKey::new(v.as_bytes())))
                .ok_or(KeyError::missing("user"))
        }),
    );
    let (app, _) = table.apply(router(), &options, store).unwrap();
    let ann: &[(&str, &[u8])] = &[("x-user", b"ann")];
    assert_eq!(status(&app, Method::GET, "/", ann).await, StatusCode::OK);
    assert_eq!(status(&app, Method::GET, "/", ann).await, StatusCode::OK);
    assert_eq!(
        status(&app, Method::GET, "/", ann).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&app, Method::GET, "/", &[]).await,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn in_memory_with_a_cap_on_keys() {
    let table = PolicyTable::from_toml(LIVE, None).unwrap();
    let router = Router::new().route("/tickets", post(|| async { "ticket" }));
    let options = PolicyOptions {
        clock: Some(Arc::new(ManualClock::new())),
        ..PolicyOptions::default()
    };
    let (app, handle) = table.apply_in_memory(router, &options, Some(1000)).unwrap();
    assert_eq!(tickets(&app, "alice", 5).await, 3);
    assert_eq!(tickets(&app, "vip", 12).await, 10);
    assert_eq!(handle.limit("tickets").unwrap().overrides(), 1);
}

/// Keys and routes print as the policy file writes them, and read back
/// the same (the startup log and reload lines show them so).
#[test]
fn keys_and_routes_print_as_written() {
    use tower_ratelimit::table::{KeySpec, RouteSpec};
    for key in [
        "bearer",
        "client-ip",
        "client-ip(v4/24, v6/48)+route",
        "peer-ip(v4/32, v6/56)",
        "header:x-tenant+api-key",
        "global",
        "app:known-api-key",
    ] {
        let spec: KeySpec = key.parse().unwrap();
        assert_eq!(spec.to_string(), key);
        assert_eq!(spec.to_string().parse::<KeySpec>().unwrap(), spec);
    }
    for route in ["POST /tickets", "/health", "GET /users/{id}"] {
        let spec: RouteSpec = route.parse().unwrap();
        assert_eq!(spec.to_string(), route);
    }
}

#[test]
fn override_keys_are_written_as_the_key_extractor_writes_keys() {
    let text = r#"
[[limit]]
name = "net"
algorithm = "gcra 1/1s"
key = "client-ip(v4/24, v6/48)"
overrides = { "2001:DB8:AA:0:0:0:0:1" = "gcra 9/1s", "198.51.100.77" = "gcra 8/1s" }
"#;
    let table = PolicyTable::from_toml(text, None).unwrap();
    let keys: Vec<&str> = table.entries()[0]
        .overrides
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["198.51.100.0/24", "2001:db8:aa::/48"]);
}
