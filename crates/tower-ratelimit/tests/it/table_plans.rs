//! Plans in a policy table (memory): free, pro and no-plan requests each
//! counted on their own limits, members from a keys file and the app's
//! list, a key of another plan never a key error; keys moved at run time
//! and kept across reloads; the keys file read again on reload, all or
//! nothing.

use crate::common::{fresh_dir, get_from};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::policy::{PlanKeys, PolicyHandle, PolicyOptions, PolicyTable};

/// A 100-byte pro key: keyed by its digest, matched all the same.
fn long_key() -> String {
    format!("pro-{}", "j".repeat(96))
}

/// The table: pro from `pro-keys.txt` beside it, free from the app.
fn table_text() -> String {
    r#"
[[plan]]
name = "pro"
key = "api-key"
keys-file = "pro-keys.txt"

[[plan]]
name = "free"
key = "api-key"
keys-app = "free-customers"

[[limit]]
name = "pro-requests"
plan = "pro"
algorithm = "fixed-window 3/1d"
key = "api-key"
routes = ["GET /items"]

[[limit]]
name = "free-requests"
plan = "free"
algorithm = "fixed-window 1/1d"
key = "api-key"
routes = ["GET /items"]

[[limit]]
name = "anonymous"
plan = "none"
algorithm = "fixed-window 2/1d"
key = "client-ip"
routes = ["GET /items"]
"#
    .to_owned()
}

/// The table at `dir/ratelimit.toml` with its pro keys, applied.
fn apply(dir: &std::path::Path) -> (Router, PolicyHandle, PathBuf) {
    let path = dir.join("ratelimit.toml");
    std::fs::write(&path, table_text()).unwrap();
    let pro = format!("# pro customers\n\npro-key-1\n  {}  \n", long_key());
    std::fs::write(dir.join("pro-keys.txt"), pro).unwrap();
    let table = PolicyTable::load(&path).unwrap();
    let free: PlanKeys = Arc::new(|| vec!["free-key-1".to_owned(), "free-key-2".to_owned()]);
    let mut options = PolicyOptions::default();
    options.plan_keys.insert("free-customers".into(), free);
    let router = Router::new().route("/items", get(|| async { "items" }));
    let (app, handle) = table.apply_in_memory(router, &options, None).unwrap();
    (app, handle, path)
}

/// A request from `peer` with `key` (none: no X-API-Key).
fn request(peer: &str, key: Option<&str>) -> axum::http::Request<axum::body::Body> {
    match key {
        Some(key) => get_from(peer, "/items", &[("x-api-key", key.as_bytes())]),
        None => get_from(peer, "/items", &[]),
    }
}

async fn admitted(app: &Router, peer: &str, key: Option<&str>, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        let res = app.clone().oneshot(request(peer, key)).await.unwrap();
        admitted += usize::from(res.status() == StatusCode::OK);
    }
    admitted
}

#[tokio::test]
async fn free_pro_and_none_each_count_on_their_own_limits() {
    let dir = fresh_dir("plans-split");
    let (app, handle, _) = apply(&dir);
    assert_eq!(admitted(&app, "192.0.2.1:1", Some("pro-key-1"), 5).await, 3);
    let long = long_key();
    assert_eq!(
        admitted(&app, "192.0.2.2:1", Some(&long), 5).await,
        3,
        "a 100-byte key"
    );
    assert_eq!(
        admitted(&app, "192.0.2.3:1", Some("free-key-1"), 5).await,
        1
    );
    assert_eq!(
        admitted(&app, "192.0.2.3:1", Some("free-key-2"), 5).await,
        1
    );
    // A key in no plan, and no key: the anonymous limit, by address.
    assert_eq!(admitted(&app, "192.0.2.4:1", Some("stranger"), 5).await, 2);
    assert_eq!(admitted(&app, "192.0.2.5:1", None, 5).await, 2);
    let counts = handle.plans().members();
    assert_eq!((counts[0].listed, counts[1].listed), (2, 2), "{counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "metrics")]
#[test]
fn a_key_of_another_plan_is_no_key_error_and_requests_are_counted_by_plan() {
    use crate::metrics::{send, Counting};
    let dir = fresh_dir("plans-metrics");
    let (mut app, _handle, _) = apply(&dir);
    let recorder = Counting::default();
    let counts = recorder.0.clone();
    metrics::with_local_recorder(&recorder, || {
        for _ in 0..10 {
            let _ = send(&mut app, request("192.0.2.1:1", Some("pro-key-1")));
            let _ = send(&mut app, request("192.0.2.2:1", Some("free-key-1")));
            let _ = send(&mut app, request("192.0.2.3:1", None));
        }
    });
    let counts = counts.lock().unwrap();
    let key_errors: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("ratelimit_key_errors_total"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(key_errors, 0, "{counts:?}");
    let allowed = |limit: &str| counts.get(&format!("ratelimit_allowed_total{{limit={limit}}}"));
    assert_eq!(allowed("pro-requests"), Some(&3), "{counts:?}");
    assert_eq!(allowed("free-requests"), Some(&1), "{counts:?}");
    assert_eq!(allowed("anonymous"), Some(&2), "{counts:?}");
    for plan in ["pro", "free", "none"] {
        let name = format!("ratelimit_plan_requests_total{{plan={plan}}}");
        assert_eq!(counts.get(&name), Some(&10), "{counts:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_key_moved_at_run_time_gets_its_new_plans_limits_across_reloads() {
    let dir = fresh_dir("plans-moves");
    let (app, handle, path) = apply(&dir);
    assert_eq!(
        admitted(&app, "192.0.2.1:1", Some("free-key-1"), 2).await,
        1
    );
    handle
        .plans()
        .move_to_plan("pro", "free-key-1")
        .await
        .unwrap();
    assert_eq!(
        admitted(&app, "192.0.2.1:1", Some("free-key-1"), 5).await,
        3,
        "pro's limits, from pro's own count"
    );
    handle.reload_file(&path).unwrap();
    assert_eq!(
        handle.plans().members()[0].moved_in,
        1,
        "kept across a reload"
    );
    // Out of pro: back to free, whose count it had used up.
    let now = handle
        .plans()
        .remove_from_plan("pro", "free-key-1")
        .await
        .unwrap();
    assert_eq!(now.as_deref(), Some("free"));
    assert_eq!(
        admitted(&app, "192.0.2.1:1", Some("free-key-1"), 1).await,
        0
    );
    assert_eq!(
        handle
            .plans()
            .remove_from_plan("pro", "free-key-1")
            .await
            .unwrap(),
        None
    );
    // Out of the plan its file lists it in: no plan, the anonymous limit.
    let now = handle
        .plans()
        .remove_from_plan("pro", "pro-key-1")
        .await
        .unwrap();
    assert_eq!(now.as_deref(), Some("none"));
    assert_eq!(admitted(&app, "192.0.2.9:1", Some("pro-key-1"), 5).await, 2);
    // A stranger moved in, then taken out: no plan again.
    handle
        .plans()
        .move_to_plan("free", "stranger-1")
        .await
        .unwrap();
    assert_eq!(
        admitted(&app, "192.0.2.8:1", Some("stranger-1"), 3).await,
        1
    );
    assert!(handle
        .plans()
        .move_to_plan("gold", "k")
        .await
        .unwrap_err()
        .contains("gold"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_reload_reads_the_keys_file_again_all_or_nothing() {
    let dir = fresh_dir("plans-reload");
    let (app, handle, path) = apply(&dir);
    assert_eq!(
        admitted(&app, "192.0.2.1:1", Some("new-pro"), 3).await,
        2,
        "no plan yet"
    );
    std::fs::write(dir.join("pro-keys.txt"), "pro-key-1\nnew-pro\n").unwrap();
    handle.reload_file(&path).unwrap();
    assert_eq!(
        admitted(&app, "192.0.2.1:1", Some("new-pro"), 5).await,
        3,
        "pro now"
    );
    // A key in both plans: the reload is refused, naming where.
    std::fs::write(dir.join("pro-keys.txt"), "pro-key-1\nfree-key-2\n").unwrap();
    let err = handle.reload_file(&path).unwrap_err().to_string();
    let both =
        "plan \"free\": keys-app \"free-customers\", key 2: a key listed in plan \"pro\" too";
    assert!(err.contains(both), "{err}");
    assert!(!err.contains("free-key-2"), "no key shown: {err}");
    // A key no request can have: refused, naming the file and line.
    let long = "k".repeat(5000);
    std::fs::write(dir.join("pro-keys.txt"), format!("pro-key-1\n{long}\n")).unwrap();
    let err = handle.reload_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("pro-keys.txt, line 2: a key of 5000 characters"),
        "{err}"
    );
    std::fs::remove_file(dir.join("pro-keys.txt")).unwrap();
    let err = handle.reload_file(&path).unwrap_err().to_string();
    assert!(err.contains("cannot read"), "{err}");
    assert_eq!(
        handle.plans().members()[0].listed,
        2,
        "the running members stay"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_shared_plan_refuses_moves_while_nothing_shares_them() {
    let text = "[[plan]]\nname = \"partner\"\nkey = \"api-key\"\nshared = true\n";
    let table = PolicyTable::from_toml(text, None).unwrap();
    let (_app, handle) = table
        .apply_in_memory(Router::new(), &PolicyOptions::default(), None)
        .unwrap();
    let err = handle
        .plans()
        .move_to_plan("partner", "k-1")
        .await
        .unwrap_err();
    assert!(err.contains("shared = true"), "{err}");
}

/// The error of `text`, read as `ratelimit.toml`.
fn load_error(text: &str) -> String {
    PolicyTable::from_toml(text, Some("ratelimit.toml".as_ref()))
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_plans_are_refused_at_load_naming_the_file_line_and_plan() {
    let plan = "[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nshared = true\n";
    let limit = |plan: &str| {
        format!("\n[[limit]]\nname = \"api\"\nplan = \"{plan}\"\nalgorithm = \"gcra 5/1m\"\nkey = \"peer-ip\"\n")
    };
    let cases = [
        (format!("{plan}{}", limit("gold")), "ratelimit.toml:6: limit \"api\": unknown plan \"gold\""),
        (limit("none"), "limit \"api\": unknown plan \"none\""),
        ("[[plan]]\nname = \"pro\"\nshared = true\n".to_owned(), "ratelimit.toml:1: plan \"pro\": missing field `key`"),
        ("[[plan]]\nname = \"pro\"\nkey = \"api-key\"\n".to_owned(), "ratelimit.toml:1: plan \"pro\": no members"),
        (format!("{plan}{plan}"), "ratelimit.toml:5: plan \"pro\": the name is used twice"),
        ("[[plan]]\nname = \"none\"\nkey = \"api-key\"\nshared = true\n".to_owned(), "plan \"none\": \"none\" is the plan"),
        ("[[plan]]\nname = \"pro\"\nkey = \"route\"\nshared = true\n".to_owned(), "plan \"pro\": key \"route\""),
        (
            "[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-file = \"/nonexistent/pro.txt\"\n".to_owned(),
            "ratelimit.toml:1: plan \"pro\": keys-file /nonexistent/pro.txt: cannot read",
        ),
        (
            "[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-env = \"RATELIMIT_TEST_UNSET_PLAN_VAR\"\n".to_owned(),
            "plan \"pro\": keys-env RATELIMIT_TEST_UNSET_PLAN_VAR is not set",
        ),
        (
            format!("{}\n[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nshraed = true\n", limit("none").replace("none", "pro")),
            "ratelimit.toml:11: plan \"pro\": unknown field `shraed`",
        ),
    ];
    for (text, expected) in cases {
        let err = load_error(&text);
        assert!(err.contains(expected), "{expected}\n{err}");
    }
}

#[test]
fn members_that_cannot_be_are_refused_at_apply_and_never_shown() {
    let dir = fresh_dir("plans-apply-errors");
    std::fs::write(dir.join("ips.txt"), "192.0.2.7\nsk-live-secret\n").unwrap();
    let text = "[[plan]]\nname = \"office\"\nkey = \"peer-ip\"\nkeys-file = \"ips.txt\"\n\n\
                [[plan]]\nname = \"partner\"\nkey = \"api-key\"\nkeys-app = \"partners\"\n";
    let table = PolicyTable::from_toml(text, Some(&dir.join("ratelimit.toml"))).unwrap();
    let options = PolicyOptions::default();
    let err = table
        .apply_in_memory(Router::new(), &options, None)
        .unwrap_err();
    assert!(err.to_string().contains("keys-app \"partners\""), "{err}");
    let mut options = PolicyOptions::default();
    options
        .plan_keys
        .insert("partners".into(), Arc::new(Vec::new));
    let err = table
        .apply_in_memory(Router::new(), &options, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ips.txt:2: plan \"office\": not a key as \"peer-ip\""),
        "{err}"
    );
    assert!(!err.contains("sk-live"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
