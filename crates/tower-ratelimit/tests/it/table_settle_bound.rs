//! A settled table limit under overlapping calls: calls on one key, released together and held in their handlers, each reserve `max-cost` (whatever their `x-max-tokens`), so no more than the limit is admitted or delivered.

use crate::common::get_from;
use crate::table_settle::applied;
use axum::extract::{Extension, Request};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Barrier};
use tower::ServiceExt;
use tower_ratelimit::CostReport;

const TABLE: &str = r#"
[[limit]]
name = "tokens"
algorithm = "fixed-window 1000/1d"
key = "peer-ip"
estimate = "header:x-max-tokens"
max-cost = 300
cost-from = "response-header:x-tokens-used"
"#;

const CALLS: usize = 40;

/// `GET /chat?tokens=N`: counts itself in, waits for the gate, then uses
/// N tokens, at most what the call reserved.
fn router(entered: Arc<AtomicUsize>, gate: watch::Receiver<bool>) -> Router {
    let handler = move |Extension(report): Extension<CostReport>, req: Request| {
        let (entered, mut gate) = (Arc::clone(&entered), gate.clone());
        async move {
            let asked: u64 = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("tokens="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            entered.fetch_add(1, Ordering::SeqCst);
            gate.wait_for(|open| *open).await.unwrap();
            [("x-tokens-used", asked.min(report.reserved()).to_string())]
        }
    };
    Router::new().route("/chat", get(handler))
}

/// The `x-max-tokens` of call `i`: none, 0 in its spellings, malformed,
/// or more than `max-cost`.
fn max_tokens(i: usize) -> Option<&'static str> {
    [
        None,
        Some("0"),
        Some("00"),
        Some("+0"),
        Some("abc"),
        Some("100000"),
    ][i % 6]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_calls_on_one_key_deliver_at_most_the_limit() {
    let entered = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let (open, gate) = watch::channel(false);
    let (app, _handle) = applied(TABLE, router(Arc::clone(&entered), gate));
    let start = Arc::new(Barrier::new(CALLS + 1));
    let mut calls = Vec::new();
    for i in 0..CALLS {
        let (app, start, refused) = (app.clone(), Arc::clone(&start), Arc::clone(&refused));
        calls.push(tokio::spawn(async move {
            let headers: Vec<(&str, &[u8])> = max_tokens(i)
                .iter()
                .map(|m| ("x-max-tokens", m.as_bytes()))
                .collect();
            let req = get_from("192.0.2.9:1", "/chat?tokens=300", &headers);
            start.wait().await;
            let res = app.oneshot(req).await.unwrap();
            if res.status() == StatusCode::TOO_MANY_REQUESTS {
                refused.fetch_add(1, Ordering::SeqCst);
                return 0;
            }
            assert_eq!(res.status(), StatusCode::OK);
            res.headers()["x-tokens-used"]
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        }));
    }
    start.wait().await;
    // Every call decided (held in its handler, or refused) before any
    // settles.
    let deadline = Instant::now() + Duration::from_secs(60);
    while entered.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst) < CALLS {
        assert!(
            Instant::now() < deadline,
            "the calls never all got an answer"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        entered.load(Ordering::SeqCst),
        3,
        "300 reserved each: 3 of 1000"
    );
    open.send(true).unwrap();
    let mut delivered = 0;
    for call in calls {
        delivered += call.await.unwrap();
    }
    assert_eq!(delivered, 900);
    assert!(delivered <= 1000);
}

#[tokio::test]
async fn a_zero_header_buys_no_more_than_no_header() {
    let (open, gate) = watch::channel(true);
    drop(open);
    let (app, _handle) = applied(TABLE, router(Arc::default(), gate));
    let mut delivered = 0;
    for i in 0..60 {
        let headers: Vec<(&str, &[u8])> = max_tokens(i)
            .iter()
            .map(|m| ("x-max-tokens", m.as_bytes()))
            .collect();
        let res = app
            .clone()
            .oneshot(get_from("192.0.2.9:1", "/chat?tokens=300", &headers))
            .await
            .unwrap();
        if res.status() == StatusCode::OK {
            delivered += res.headers()["x-tokens-used"]
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    assert_eq!(
        delivered, 900,
        "three calls of 300, then 100 left: none fits"
    );
}
