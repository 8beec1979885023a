//! `deploy::Limits` from files on disk: an error about a plan's keys file
//! names that file and its line, never the deployment file's line, nor
//! the key.

use crate::common::{capture, fresh_dir};
use axum::routing::get;
use axum::Router;
use tower_ratelimit::deploy::Limits;

#[test]
fn a_key_in_two_plans_is_blamed_on_its_keys_file_and_line() {
    let dir = fresh_dir("deploy-plans");
    let gw = dir.join("gw.toml");
    std::fs::write(dir.join("free.keys"), "free-key-1\nsecret-key-both\n").unwrap();
    std::fs::write(dir.join("pro.keys"), "# pro\npro-key-1\nsecret-key-both\n").unwrap();
    let text = "[store]\nkind = \"memory\"\n\n\
        [[plan]]\nname = \"free\"\nkey = \"api-key\"\nkeys-file = \"free.keys\"\n\n\
        [[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-file = \"pro.keys\"\n\n\
        [[limit]]\nname = \"pro-requests\"\nplan = \"pro\"\nalgorithm = \"gcra 5/1m\"\nkey = \"api-key\"\n";
    std::fs::write(&gw, text).unwrap();
    let limits = Limits::from_toml(text, Some(&gw), |_| None).unwrap();
    let err = limits
        .apply(Router::new().route("/", get(|| async { "ok" })))
        .unwrap_err()
        .to_string();
    let at = format!("{}:3:", dir.join("pro.keys").display());
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("a key listed in plan \"free\" too"), "{err}");
    assert!(
        !err.contains("secret-key-both") && !err.contains("gw.toml"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The environment: the plan's key and the admin token.
fn env(var: &str) -> Option<String> {
    match var {
        "PRO_KEYS" => Some("pro-key-1".to_owned()),
        "ADMIN_TOKEN" => Some("0123456789abcdef-admin".to_owned()),
        _ => None,
    }
}

/// In memory a move stays in the process, and its answer says so.
#[tokio::test]
async fn a_move_says_whether_other_instances_get_it() {
    use tower::ServiceExt;
    let text = "[store]\nkind = \"memory\"\n[admin]\naddress = \"127.0.0.1:0\"\n\n\
        [[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-env = \"PRO_KEYS\"\n\n\
        [[limit]]\nname = \"pro-requests\"\nplan = \"pro\"\nalgorithm = \"gcra 5/1m\"\nkey = \"api-key\"\n";
    let limits = Limits::from_toml(text, None, env).unwrap();
    let _app = limits
        .apply(Router::new().route("/", get(|| async { "ok" })))
        .unwrap();
    let req = http::Request::put("/plans/pro/keys/trial-key-7")
        .header("authorization", "Bearer 0123456789abcdef-admin")
        .body(axum::body::Body::empty())
        .unwrap();
    let res = limits.admin_router().unwrap().oneshot(req).await.unwrap();
    assert_eq!(res.status(), http::StatusCode::OK);
    let body = axum::body::to_bytes(res.into_body(), 1 << 16)
        .await
        .unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert!(body.contains("\"shared\":false"), "{body}");
}

/// The startup lines name each limit's plan, the allow list (its keys
/// counted, never shown), the memory store's cap and where the admin
/// address came from.
#[tokio::test]
async fn the_startup_log_names_plans_lists_and_sources() {
    let text = "allow = [\"10.0.0.0/8\", \"secret-allowed-key\"]\n\n\
        [store]\nkind = \"memory\"\n[admin]\naddress = \"127.0.0.1:0\"\n[server]\naddr = \"127.0.0.1:0\"\n\n\
        [[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-env = \"PRO_KEYS\"\n\n\
        [[limit]]\nname = \"pro-requests\"\nplan = \"pro\"\nalgorithm = \"gcra 5/1m\"\nkey = \"api-key\"\n";
    let (logs, guard) = capture(tracing::Level::INFO);
    let limits = Limits::from_toml(text, None, env).unwrap();
    let app = limits
        .apply(Router::new().route("/", get(|| async { "ok" })))
        .unwrap();
    let server = limits.bind(app).await.unwrap();
    drop((server, guard));
    let text = logs.text();
    for said in [
        "plan=\"pro\"",
        "allow=10.0.0.0/8, keys not shown: 1",
        "max_keys=1000000",
        "from=\"[admin] address\"",
        "from=\"[server] addr\"",
    ] {
        assert!(text.contains(said), "{said} not in {text}");
    }
    assert!(
        !text.contains("secret-allowed-key") && !text.contains("ADMIN_ADDR"),
        "{text}"
    );
}

/// `REDIS_URL` over a memory store keeps its cap, the default one too, as
/// the fallback's: the limits still decide while Redis is away.
#[test]
fn redis_url_over_memory_falls_back_with_the_memory_cap() {
    let text = "[[limit]]\nname = \"a\"\nalgorithm = \"gcra 5/1m\"\nkey = \"peer-ip\"\n";
    let limits = Limits::from_toml(text, None, |_| None).unwrap();
    let memory = ratelimit_redis::StoreSettings::Memory {
        max_keys: Some(1_000_000),
    };
    assert_eq!(limits.store(), &memory);
    let url = |var: &str| (var == "REDIS_URL").then(|| "redis://127.0.0.1:1/".to_owned());
    let limits = Limits::from_toml(text, None, url).unwrap();
    assert!(
        matches!(
            limits.store(),
            ratelimit_redis::StoreSettings::Redis {
                fallback_max_keys: Some(1_000_000),
                ..
            }
        ),
        "{:?}",
        limits.store()
    );
}
