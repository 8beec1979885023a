//! Two instances, in two processes, wired to Redis the way
//! ratelimit-redis's README shows first (a policy table, one
//! `StoreSettings::build` per limit): a 100-byte header key shares one
//! limit across both (each process hashing it alike, with nothing
//! shared by the app), and the file's `ban` holds on both.

use super::*;
use axum::http::StatusCode;
use axum::routing::post;
use integration_tests::redis_server::RedisServer;
use ratelimit_redis::StoreSettings;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable, StoreSpec};

const POLICY: &str = r#"
[[limit]]
name = "tenants"
algorithm = "fixed-window 20/10m"
key = "header:x-tenant"
routes = ["POST /items"]
ban = "1h"
ban-any-key = true
"#;

/// The environment variable that makes `second_instance` run (the Redis
/// URL); unset, it does nothing.
const URL_VAR: &str = "FLEET_ON_REDIS_URL";

/// An instance as the README wires it, but for a patient store: on a
/// busy machine a slow answer is not an outage, so the counts stay exact.
fn instance(url: &str) -> Router {
    let table = PolicyTable::from_toml(POLICY, None).unwrap();
    let mut settings = StoreSettings::redis(url);
    if let StoreSettings::Redis { timeout, .. } = &mut settings {
        *timeout = Some(std::time::Duration::from_secs(5));
    }
    let router = Router::new().route("/items", post(|| async { "ok" }));
    let (router, _handle) = table
        .apply(router, &PolicyOptions::default(), |spec: &StoreSpec| {
            settings.build(spec.name(), spec.live(), spec.ban())
        })
        .unwrap();
    router
}

/// Sends `n` requests with the 100-byte tenant key: how many were
/// admitted, and the last `Retry-After`.
async fn send(app: &Router, n: usize) -> (usize, Option<u64>) {
    let tenant = format!("tenant-{}", "t".repeat(93));
    assert_eq!(tenant.len(), 100);
    let (mut ok, mut retry) = (0, None);
    for _ in 0..n {
        let req = Request::builder()
            .method("POST")
            .uri("/items")
            .header("x-tenant", &tenant)
            .extension(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 1))))
            .body(Body::empty())
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        if res.status() == StatusCode::OK {
            ok += 1;
        }
        retry = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok());
    }
    (ok, retry)
}

/// The second instance, run by `two_processes_share_a_long_key_and_keep_the_ban`
/// in a process of its own: prints what it was admitted.
#[tokio::test]
async fn second_instance() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    let (ok, _) = send(&instance(&url), 20).await;
    println!("admitted {ok}");
}

#[tokio::test]
async fn two_processes_share_a_long_key_and_keep_the_ban() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(exe)
            .args([
                "examples::fleet_on_redis::second_instance",
                "--exact",
                "--nocapture",
            ])
            .env(URL_VAR, url)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let theirs: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("admitted "))
        .unwrap_or_else(|| panic!("no count in {stdout}"))
        .parse()
        .unwrap();
    let (ours, retry) = send(&instance(&server.url()), 20).await;
    // One limit of 20 for both processes: 20 admitted of 40.
    assert_eq!((theirs, ours), (20, 0));
    // Banned for the hour, not just to the 10-minute window's end.
    let retry = retry.expect("a Retry-After on the 429");
    assert!(retry > 600, "Retry-After {retry}: the ban was dropped");
}
