//! `POST /v1/chat`, the AI gateway: tokens settled after the response, debt and its `Retry-After`, the daily bound, all-or-nothing, a streamed call cut after 3 events; in process on a manual clock, and as processes (memory; two instances on one redis-server).

use crate::startup::example;
use axum::body::Body;
use axum::http::Request;
use axum_example::{app_with, ApiKeys, Config, MemoryStores};
use futures_util::StreamExt;
use ratelimit_core::ManualClock;
use ratelimit_test_support::redis_server::RedisServer;
use ratelimit_test_support::spawned::Spawned;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const BIG: &str = r#"{"tokens": 40000}"#;

fn in_process(clock: &ManualClock) -> axum::Router {
    let config = Config {
        clock: Arc::new(clock.clone()),
        api_keys: ApiKeys::parse("k1,k2").unwrap(),
        ..Config::default()
    };
    app_with(&config, &MemoryStores::default())
}

async fn chat(app: &axum::Router, key: &str, body: &str) -> axum::response::Response {
    let req = Request::post("/v1/chat")
        .header("x-api-key", key)
        .body(Body::from(body.to_owned()))
        .unwrap();
    app.clone().oneshot(req).await.unwrap()
}

/// `r` of limit `name` in a `RateLimit` field.
fn remaining(field: &str, name: &str) -> Option<u64> {
    let item = field
        .split(',')
        .find(|i| i.trim().starts_with(&format!("\"{name}\"")))?;
    let r = item.split(';').find_map(|p| p.trim().strip_prefix("r="))?;
    r.parse().ok()
}

fn field(res: &axum::response::Response) -> String {
    res.headers()
        .get_all("ratelimit")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test]
async fn three_calls_into_debt_then_429_until_the_debt_is_repaid() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    for i in 0..3 {
        let res = chat(&app, "k1", BIG).await;
        assert_eq!(res.status(), 200, "call {i}");
        assert_eq!(res.headers()["x-tokens-used"], "40000");
    }
    let res = chat(&app, "k1", BIG).await;
    assert_eq!(res.status(), 429);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    // A refused call took nothing from the per-minute limit: 60 - 3.
    assert_eq!(
        remaining(&field(&res), "chat-requests"),
        Some(57),
        "{}",
        field(&res)
    );
    // Still denied a second before the Retry-After, admitted at it.
    clock.advance(Duration::from_secs(wait - 1));
    assert_eq!(chat(&app, "k1", BIG).await.status(), 429);
    clock.advance(Duration::from_secs(1));
    assert_eq!(chat(&app, "k1", BIG).await.status(), 200);
}

#[tokio::test]
async fn no_more_than_a_day_s_budget_and_one_call_are_admitted_in_a_day() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    let mut admitted = 0;
    // A call every 10 minutes for a day.
    for _ in 0..144 {
        let res = chat(&app, "k1", BIG).await;
        if res.status() == 200 {
            admitted += 40_000;
        }
        clock.advance(Duration::from_secs(600));
    }
    // One day: at most two windows' worth, each 100,000 plus one call.
    assert!(admitted >= 120_000, "{admitted}");
    assert!(admitted <= 2 * 140_000, "{admitted}");
    // Within the first window of the key: at most 100,000 + 40,000.
    let clock = ManualClock::new();
    let app = in_process(&clock);
    let mut first_window = 0;
    for _ in 0..20 {
        if chat(&app, "k2", BIG).await.status() == 200 {
            first_window += 40_000;
        }
    }
    assert_eq!(first_window, 120_000);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_call_cut_after_three_events_charges_300() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    let res = chat(&app, "k1", r#"{"tokens": 1000, "stream": true}"#).await;
    assert_eq!(res.status(), 200);
    let mut events = res.into_body().into_data_stream();
    for _ in 0..3 {
        events.next().await.unwrap().unwrap();
    }
    drop(events);
    let res = chat(&app, "k1", r#"{"tokens": 0}"#).await;
    // 300 used, and this call's own reservation of 1.
    assert_eq!(
        remaining(&field(&res), "chat-tokens"),
        Some(100_000 - 300 - 1)
    );
}

/// Sends a request on a new connection: the whole answer.
fn exchange(addr: SocketAddr, key: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-API-Key: {key}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("an answer");
    out
}

fn status(answer: &str) -> u16 {
    answer.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// Every value of header `name` in `answer`, joined by `, `.
fn header(answer: &str, name: &str) -> Option<String> {
    let head = answer.split("\r\n\r\n").next()?;
    let values: Vec<&str> = head
        .lines()
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Reads a streamed call's first 3 events, then hangs up.
fn cut_after_three(addr: SocketAddr, key: &str) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = r#"{"tokens": 2000, "stream": true}"#;
    let req = format!(
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while String::from_utf8_lossy(&seen).matches("data:").count() < 3 {
        let n = s.read(&mut buf).expect("events");
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&seen).matches("data:").count(), 3);
    drop(s);
}

/// The done-when checks against running instances (calls alternate).
fn done_when(addrs: &[SocketAddr]) {
    let at = |i: usize| addrs[i % addrs.len()];
    for i in 0..3 {
        let answer = exchange(at(i), "k1", BIG);
        assert_eq!(status(&answer), 200, "call {i}: {answer}");
    }
    let answer = exchange(at(3), "k1", BIG);
    assert_eq!(status(&answer), 429, "{answer}");
    let wait: u64 = header(&answer, "retry-after").unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let fields = header(&answer, "ratelimit").unwrap_or_default();
    assert_eq!(remaining(&fields, "chat-requests"), Some(57), "{answer}");

    cut_after_three(at(0), "k2");
    // The settlement lands when the server sees the hang-up.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = exchange(at(1), "k2", r#"{"tokens": 0}"#);
        let fields = header(&answer, "ratelimit").unwrap_or_default();
        let left = remaining(&fields, "chat-tokens");
        if left == Some(100_000 - 300 - 1) {
            break;
        }
        assert!(Instant::now() < deadline, "{answer}");
        assert!(
            left > Some(100_000 - 300 - 1),
            "charged more than 3 events: {answer}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn instance(redis: Option<&str>) -> Spawned {
    let mut cmd = example();
    cmd.env("API_KEYS", "k1,k2,warm");
    if let Some(url) = redis {
        cmd.env("REDIS_URL", url);
    }
    Spawned::start(cmd)
}

#[test]
fn the_gateway_as_a_process_in_memory() {
    let app = instance(None);
    done_when(&[app.addr]);
}

#[test]
fn the_gateway_across_two_instances_on_one_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let apps = [instance(Some(&redis.url())), instance(Some(&redis.url()))];
    // Connect both instances' stores first (a first check slower than
    // 50 ms decides in memory).
    for app in &apps {
        assert_eq!(status(&exchange(app.addr, "warm", r#"{"tokens": 1}"#)), 200);
    }
    done_when(&[apps[0].addr, apps[1].addr]);
}
