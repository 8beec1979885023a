//! A policy table whose limits live in Redis, on two instances (two apps,
//! each with its own table, handle and connections): a reload carries
//! each client's used quota over in Redis, an instance not yet reloaded
//! keeps its settings, a bad file or one adding a limit keeps the running
//! limits, and overrides reach Redis.

use super::*;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use integration_tests::redis_server::RedisServer;
use ratelimit_redis::StoreSettings;
use tower_ratelimit::table::{PolicyHandle, PolicyOptions, PolicyTable};

const POLICY: &str = r#"
[[limit]]
name = "tickets"
algorithm = "gcra 3/1h"
key = "bearer"
routes = ["POST /tickets"]
"#;

fn instance(server: &RedisServer, text: &str) -> (Router, PolicyHandle) {
    let settings = StoreSettings::Redis {
        url: server.url(),
        tls_ca: None,
        prefix: Some("policy:".to_owned()),
        timeout: Some(Duration::from_secs(5)),
        fallback_max_keys: None,
        lease: None,
        key_secret: None,
    };
    let router = Router::new().route("/tickets", post(|| async { "ticket" }));
    PolicyTable::from_toml(text, None)
        .unwrap()
        .apply(router, &PolicyOptions::default(), |spec| {
            settings.build(spec.name(), spec.live(), spec.ban())
        })
        .unwrap()
}

async fn tickets(app: &Router, token: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let req = Request::builder()
            .method(Method::POST)
            .uri("/tickets")
            .header("authorization", format!("Bearer {token}"))
            .extension(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 1))))
            .body(Body::empty())
            .unwrap();
        if app.clone().oneshot(req).await.unwrap().status() == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

/// A file of its own for a test.
fn file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-on-redis-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ratelimit.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn reloads_carry_quota_over_in_redis_and_bad_files_keep_the_running_limits() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, handle_a) = instance(&server, POLICY);
    let (b, handle_b) = instance(&server, POLICY);
    // alice uses 2 of 3, on both instances.
    assert_eq!(tickets(&a, "alice", 1).await, 1);
    assert_eq!(tickets(&b, "alice", 1).await, 1);
    // A reloads its file: 2 used of a new 4 leaves 2, in Redis.
    let edited = file("a", &POLICY.replace("gcra 3/1h", "gcra 4/1h"));
    handle_a.reload_file(&edited).unwrap();
    // B's file is bad: rejected, naming the problem; B keeps 3/1h.
    let bad = file("b", &POLICY.replace("gcra 3/1h", "gcra 3/1h brust 2"));
    let err = handle_b.reload_file(&bad).unwrap_err().to_string();
    assert!(
        err.contains("brust") && err.contains("ratelimit.toml"),
        "{err}"
    );
    let added = format!(
        "{POLICY}\n[[limit]]\nname = \"more\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\n"
    );
    let err = handle_b
        .reload(&PolicyTable::from_toml(&added, None).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"more\": added"), "{err}");
    assert_eq!(
        handle_b.limit("tickets").unwrap().get().to_string(),
        "gcra 3/1h"
    );
    // B, still on 3/1h: 2 used leave 1 (and the state is carried back).
    assert_eq!(tickets(&b, "alice", 5).await, 1);
    // B reloads the good file: both on 4/1h, 3 used of 4.
    handle_b.reload_file(&edited).unwrap();
    assert_eq!(tickets(&a, "alice", 5).await, 1);
    assert_eq!(tickets(&b, "alice", 5).await, 0);
    // An override reaches Redis on the instance that sets it.
    let vip: ratelimit_core::AnyAlgorithm = "gcra 10/1h".parse().unwrap();
    handle_a
        .limit("tickets")
        .unwrap()
        .set_override("vip", vip)
        .unwrap();
    assert_eq!(tickets(&a, "vip", 12).await, 10);
    assert_eq!(tickets(&b, "vip", 1).await, 0);
}
