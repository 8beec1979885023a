//! The Grafana dashboard (`examples/axum/grafana/ratelimit.json`) names
//! only metrics the example serves: every metric in its queries is in the
//! `/metrics` output of `axum-example` on a real redis-server, after
//! traffic, a reload, and the loss of Redis.

use super::startup::{example, get, hup, samples, ACCOUNT};
use ratelimit_test_support::redis_server::{free_port, RedisServer};
use ratelimit_test_support::spawned::Spawned;
use std::collections::BTreeSet;
use std::time::Duration;

/// The metric names in `expr` (`ratelimit_...`), histogram series
/// (`_bucket`, `_sum`, `_count`) reduced to the histogram's name.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("ratelimit_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// Every `expr` of every panel's targets.
fn dashboard_queries() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/grafana/ratelimit.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .expect("the dashboard is JSON");
    let panels = json["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6, "{} panels", panels.len());
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("targets").iter())
        .map(|t| t["expr"].as_str().expect("expr").to_owned())
        .collect()
}

#[test]
fn every_metric_the_dashboard_queries_is_served() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let port = free_port();
    let mut cmd = example();
    cmd.env("METRICS_ADDR", format!("127.0.0.1:{port}"))
        .env("REDIS_URL", redis.url());
    let mut app = Spawned::start(cmd);
    for _ in 0..3 {
        app.status(ACCOUNT);
    }
    hup(&mut app, "no change");
    redis.kill();
    // Limits Redis has not refused yet: each check goes to Redis, fails,
    // and the fallback decides.
    let body = r#"{"username":"alice","password":"guess"}"#;
    let login = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    for _ in 0..3 {
        app.status(&login);
    }
    // The upkeep publishes the stores' counts every second.
    std::thread::sleep(Duration::from_millis(2_500));
    let (status, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    let served: BTreeSet<String> = samples(&body)
        .keys()
        .map(|series| series.split('{').next().unwrap().to_owned())
        .collect();
    let mut named = BTreeSet::new();
    for expr in dashboard_queries() {
        for name in metric_names(&expr) {
            named.insert(name);
        }
    }
    assert!(named.len() >= 8, "{named:?}");
    let missing: Vec<&String> = named.iter().filter(|n| !served.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, which /metrics lacks:\n{body}"
    );
}
