//! `pace`, `pace-after` and `pace-piece` in a policy table: checked at load with errors naming the limit, a paced route at the algorithm's rate per key (paused clock), other routes unpaced, a reload keeping pace settings.

use crate::common::get_from;
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http_body_util::BodyExt;
use ratelimit_core::TokioClock;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};

const MIB: usize = 1 << 20;

fn entry(algorithm: &str, extra: &str) -> String {
    format!("[[limit]]\nname = \"d\"\nalgorithm = \"{algorithm}\"\nkey = \"peer-ip\"\n{extra}\n")
}

#[test]
fn bad_settings_are_refused_naming_the_limit() {
    let bucket = "token-bucket 65536 refill 262144/1s";
    let cases = [
        (
            bucket,
            "pace = \"download\"",
            "limit \"d\": bad pace \"download\"",
        ),
        (
            bucket,
            "pace-after = \"64KiB\"",
            "limit \"d\": pace-after and pace-piece need pace",
        ),
        (
            bucket,
            "pace = \"response\"\npace-piece = 0",
            "limit \"d\": pace-piece = 0 sends nothing",
        ),
        (
            bucket,
            "pace = \"response\"\npace-piece = \"1GiB\"",
            "limit \"d\": pace-piece = 1073741824 is above",
        ),
        (
            bucket,
            "pace = \"response\"\npace-after = \"64 kib\"",
            "limit \"d\": bad size \"64 kib\"",
        ),
        (
            "fixed-window 262144/1s",
            "pace = \"response\"",
            "limit \"d\": pace needs a steady rate, from gcra or token-bucket: \"fixed-window\"",
        ),
        (
            "leaky-bucket 10/1s queue 5",
            "pace = \"both\"",
            "limit \"d\": pace needs a steady rate",
        ),
        (
            bucket,
            "pace = \"response\"\nmode = \"dry-run\"",
            "limit \"d\": mode does not go with pace",
        ),
        (
            bucket,
            "pace = \"response\"\ncount = [200]",
            "limit \"d\": count does not go with pace",
        ),
        (
            bucket,
            "pace = \"request\"\nban = \"1h\"",
            "limit \"d\": ban does not go with pace",
        ),
        (
            bucket,
            "pace = \"request\"\ncost = 2",
            "limit \"d\": cost does not go with pace",
        ),
        (
            bucket,
            "pace = \"response\"\noverrides = { \"10.0.0.7\" = \"sliding-log 5/1s\" }",
            "limit \"d\": pace needs a steady rate, from gcra or token-bucket: \"sliding-log\"",
        ),
    ];
    for (algorithm, extra, want) in cases {
        let err = PolicyTable::from_toml(&entry(algorithm, extra), None)
            .expect_err(extra)
            .to_string();
        assert!(err.contains(want), "{extra}: {err}");
    }
    for ok in [
        "pace = \"response\"\npace-after = \"64KiB\"\npace-piece = 4096",
        "pace = \"both\"",
    ] {
        PolicyTable::from_toml(&entry("gcra 262144/1s", ok), None).expect(ok);
    }
}

const TABLE: &str = r#"
[[limit]]
name = "download"
algorithm = "token-bucket 65536 refill 262144/1s"
key = "peer-ip"
routes = ["GET /download"]
pace = "response"
pace-after = "64KiB"
"#;

async fn timed(app: &Router, peer: &str, path: &str) -> (usize, Duration) {
    let start = Instant::now();
    let res = app
        .clone()
        .oneshot(get_from(peer, path, &[]))
        .await
        .unwrap();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (body.len(), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_paced_route_goes_at_the_rate_per_client() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let entry = table.entry("download").unwrap();
    assert_eq!((entry.pace_after, entry.pace_piece), (Some(65536), None));
    let one_mib = || async { Body::from(vec![0u8; MIB]) };
    let router = Router::new()
        .route("/download", get(one_mib))
        .route("/other", get(one_mib));
    let options = PolicyOptions {
        clock: Some(Arc::new(TokioClock::new())),
        ..PolicyOptions::default()
    };
    let (app, _handle) = table.apply_in_memory(router, &options, None).unwrap();
    // 64 KiB unpaced, 64 KiB of burst, then 896 KiB at 256 KiB/s: 3.5 s.
    let (a, b) = tokio::join!(
        timed(&app, "203.0.113.7:1", "/download"),
        timed(&app, "198.51.100.9:1", "/download"),
    );
    for (len, took) in [a, b] {
        assert_eq!(len, MIB);
        let took = took.as_secs_f64();
        assert!((took - 3.5).abs() <= 3.5 * 0.05, "took {took:.3} s");
    }
    // A route the limit does not list is not paced.
    let (len, took) = timed(&app, "203.0.113.7:1", "/other").await;
    assert_eq!((len, took), (MIB, Duration::ZERO));
}

#[test]
fn a_reload_cannot_change_pace() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let router = Router::new().route("/download", get(|| async { "x" }));
    let (_app, handle) = table
        .apply_in_memory(router, &PolicyOptions::default(), None)
        .unwrap();
    let changed = TABLE.replace("pace-after = \"64KiB\"", "pace-after = \"1MiB\"");
    let err = handle
        .reload(&PolicyTable::from_toml(&changed, None).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("pace-after"), "{err}");
    // The rate is the algorithm's, and a reload changes it.
    let faster = TABLE.replace("262144/1s", "524288/1s");
    handle
        .reload(&PolicyTable::from_toml(&faster, None).unwrap())
        .unwrap();
}

/// A paced upload past the server's body limit (a `Limited` body, as
/// `RequestBodyLimitLayer` makes it) is refused as unpaced ones are: 413.
#[tokio::test(start_paused = true)]
async fn a_paced_upload_past_the_body_limit_is_413() {
    let table = TABLE
        .replace("GET /download", "POST /upload")
        .replace("\"response\"", "\"request\"");
    let table = PolicyTable::from_toml(&table, None).unwrap();
    let router = Router::new().route(
        "/upload",
        axum::routing::post(|body: axum::body::Bytes| async move { body.len().to_string() }),
    );
    let options = PolicyOptions {
        clock: Some(Arc::new(TokioClock::new())),
        ..PolicyOptions::default()
    };
    let (app, _handle) = table.apply_in_memory(router, &options, None).unwrap();
    for (size, want) in [(100, 200), (200, 413)] {
        let limited = http_body_util::Limited::new(
            http_body_util::Full::new(axum::body::Bytes::from(vec![0u8; size])),
            150,
        );
        let mut req = get_from("203.0.113.7:1", "/upload", &[]);
        *req.method_mut() = http::Method::POST;
        *req.body_mut() = Body::new(limited);
        let res = app.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), want, "{size} bytes");
    }
}
