//! `POST /v1/chat`, the AI gateway: each call reserves its `x-max-tokens` (40,000 without a positive decimal there) and delivers no more, so overlapping calls and streams on one key get at most the day's 100,000 tokens; 429 and its `Retry-After`, the daily bound, all-or-nothing, a streamed call cut after 3 events; in process on a manual clock, and as processes (memory; two instances on one redis-server).

use crate::startup::{example, limits};
use axum::body::Body;
use axum::http::Request;
use axum_example::{app_on, ApiKeys, Config};
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
        clock: Some(Arc::new(clock.clone())),
        api_keys: ApiKeys::parse("k1,k2,k3,k4,k5").unwrap(),
    };
    app_on(&limits(|_| None), &config).unwrap()
}

async fn chat(app: &axum::Router, key: &str, body: &str) -> axum::response::Response {
    chat_with(app, key, None, body).await
}

/// A call with `x-max-tokens: max` (none without it).
async fn chat_with(
    app: &axum::Router,
    key: &str,
    max: Option<&str>,
    body: &str,
) -> axum::response::Response {
    let mut req = Request::post("/v1/chat").header("x-api-key", key);
    if let Some(max) = max {
        req = req.header("x-max-tokens", max);
    }
    let req = req.body(Body::from(body.to_owned())).unwrap();
    app.clone().oneshot(req).await.unwrap()
}

/// The tokens a call delivered (its `x-tokens-used`).
fn used(res: &axum::response::Response) -> u64 {
    res.headers()["x-tokens-used"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The tokens in a stream's events (`data: {"tokens": N}`).
fn streamed(events: &str) -> u64 {
    events
        .split("data: ")
        .filter_map(|e| e.split(": ").nth(1)?.split('}').next()?.parse::<u64>().ok())
        .sum()
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
async fn two_full_calls_then_429_until_the_window_ends() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    for i in 0..2 {
        let res = chat(&app, "k1", BIG).await;
        assert_eq!(res.status(), 200, "call {i}");
        assert_eq!(res.headers()["x-tokens-used"], "40000");
    }
    // 80,000 used: a third call's 40,000 does not fit.
    let res = chat(&app, "k1", BIG).await;
    assert_eq!(res.status(), 429);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    // A refused call took nothing from the per-minute limit: 60 - 2.
    assert_eq!(
        remaining(&field(&res), "chat-requests"),
        Some(58),
        "{}",
        field(&res)
    );
    // A call asking for at most 20,000 fits, and gets 20,000.
    let res = chat_with(&app, "k1", Some("20000"), BIG).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-tokens-used"], "20000");
    // Still denied a second before the Retry-After, admitted at it.
    clock.advance(Duration::from_secs(wait - 1));
    assert_eq!(chat(&app, "k1", BIG).await.status(), 429);
    clock.advance(Duration::from_secs(1));
    assert_eq!(chat(&app, "k1", BIG).await.status(), 200);
}

#[tokio::test]
async fn no_more_than_a_day_s_budget_is_admitted_in_a_day() {
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
    // One day: at most two windows' worth, each 100,000 (2 calls of 40,000).
    assert!(admitted >= 80_000, "{admitted}");
    assert!(admitted <= 2 * 100_000, "{admitted}");
    // Within the first window of the key: 2 calls of 40,000.
    let clock = ManualClock::new();
    let app = in_process(&clock);
    let mut first_window = 0;
    for _ in 0..20 {
        if chat(&app, "k2", BIG).await.status() == 200 {
            first_window += 40_000;
        }
    }
    assert_eq!(first_window, 80_000);
}

#[tokio::test]
async fn a_zero_max_tokens_buys_no_more_than_none() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    for (key, header) in [
        ("k1", None),
        ("k2", Some("0")),
        ("k3", Some("00")),
        ("k4", Some("+0")),
        ("k5", Some("-5")),
    ] {
        let mut delivered = 0;
        for _ in 0..10 {
            let res = chat_with(&app, key, header, BIG).await;
            if res.status() == 200 {
                delivered += used(&res);
            }
        }
        assert_eq!(delivered, 80_000, "{header:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn four_overlapping_streams_deliver_at_most_the_day_s_budget() {
    let clock = ManualClock::new();
    let app = in_process(&clock);
    let streams: Vec<_> = (0..4)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let res = chat(&app, "k1", r#"{"tokens": 40000, "stream": true}"#).await;
                if res.status() != 200 {
                    return 0;
                }
                let body = axum::body::to_bytes(res.into_body(), usize::MAX)
                    .await
                    .unwrap();
                streamed(&String::from_utf8_lossy(&body))
            })
        })
        .collect();
    let mut delivered = 0;
    for s in streams {
        delivered += s.await.unwrap();
    }
    // Each reserves 40,000: two fit in 100,000, and each streams 40,000.
    assert_eq!(delivered, 80_000);
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
    let res = chat_with(&app, "k1", Some("1"), r#"{"tokens": 0}"#).await;
    // 300 used, and this call's own reservation of 1.
    assert_eq!(
        remaining(&field(&res), "chat-tokens"),
        Some(100_000 - 300 - 1)
    );
}

/// Sends a request on a new connection: the whole answer.
fn exchange(addr: SocketAddr, key: &str, body: &str) -> String {
    exchange_with(addr, key, "", body)
}

/// [`exchange`] with more header lines (each ending in `\r\n`).
fn exchange_with(addr: SocketAddr, key: &str, headers: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-API-Key: {key}\r\n\
         {headers}Content-Length: {}\r\n\r\n{body}",
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

/// Opens a streamed call of `tokens` on `key` and reads until `enough`
/// holds for what it read: that, and the connection, still open.
fn open_stream(
    addr: SocketAddr,
    key: &str,
    tokens: u64,
    enough: impl Fn(&str) -> bool,
) -> (String, TcpStream) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = format!(r#"{{"tokens": {tokens}, "stream": true}}"#);
    let req = format!(
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !enough(&String::from_utf8_lossy(&seen)) {
        let n = s.read(&mut buf).expect("an answer");
        assert!(n > 0, "the answer ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    (String::from_utf8_lossy(&seen).into_owned(), s)
}

/// Reads a streamed call's first 3 events, then hangs up.
fn cut_after_three(addr: SocketAddr, key: &str) {
    let events = |seen: &str| seen.matches("data:").count();
    let (seen, s) = open_stream(addr, key, 2000, |seen| events(seen) >= 3);
    assert_eq!(events(&seen), 3);
    drop(s);
}

/// The done-when checks against running instances (calls alternate).
fn done_when(addrs: &[SocketAddr]) {
    let at = |i: usize| addrs[i % addrs.len()];
    // `chat-requests` counts in windows aligned on the minute: the three
    // calls go well inside one, or the count would start again.
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        % 60.0;
    if into_minute > 50.0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(60.5 - into_minute));
    }
    for i in 0..2 {
        let answer = exchange(at(i), "k1", BIG);
        assert_eq!(status(&answer), 200, "call {i}: {answer}");
    }
    let answer = exchange(at(2), "k1", BIG);
    assert_eq!(status(&answer), 429, "{answer}");
    let wait: u64 = header(&answer, "retry-after").unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let fields = header(&answer, "ratelimit").unwrap_or_default();
    assert_eq!(remaining(&fields, "chat-requests"), Some(58), "{answer}");

    cut_after_three(at(0), "k2");
    // The settlement lands when the server sees the hang-up: until then
    // the stream's reservation (40,000) stands.
    let (settled, unsettled) = (100_000 - 300 - 1, 100_000 - 40_000 - 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = exchange_with(at(1), "k2", "X-Max-Tokens: 1\r\n", r#"{"tokens": 0}"#);
        let fields = header(&answer, "ratelimit").unwrap_or_default();
        let left = remaining(&fields, "chat-tokens");
        if left == Some(settled) {
            break;
        }
        assert!(Instant::now() < deadline, "{answer}");
        assert_eq!(
            left,
            Some(unsettled),
            "charged other than 3 events: {answer}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the attacks on the day's budget got, each on a fresh key.
struct Attacks {
    /// Tokens 50 overlapping calls of 40,000 delivered in all.
    burst: u64,
    /// Tokens admitted streams of 40,000 reserved, 4 opened together.
    streams: u64,
    /// Tokens 5 calls delivered: without `x-max-tokens`, then with `0`,
    /// then with `+0`.
    headers: [u64; 3],
}

/// The attacks against running instances (calls alternate).
fn attacks(addrs: &[SocketAddr]) -> Attacks {
    let at = |i: usize| addrs[i % addrs.len()];
    let answers: Vec<String> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..50)
            .map(|i| s.spawn(move || exchange(at(i), "k3", BIG)))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(
        answers.iter().all(|a| matches!(status(a), 200 | 429)),
        "{answers:?}"
    );
    let burst = answers.iter().map(|a| delivered(a)).sum();

    let opened = std::sync::Barrier::new(4);
    let codes: Vec<u16> = std::thread::scope(|s| {
        let streams: Vec<_> = (0..4)
            .map(|i| {
                let opened = &opened;
                s.spawn(move || {
                    let (code, held) = stream_head(at(i), "k4");
                    opened.wait(); // every stream decided before any ends
                    drop(held);
                    code
                })
            })
            .collect();
        streams.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(codes.iter().all(|&c| c == 200 || c == 429), "{codes:?}");
    let streams = 40_000 * codes.iter().filter(|&&c| c == 200).count() as u64;

    let headers = [
        ("k5", ""),
        ("k6", "X-Max-Tokens: 0\r\n"),
        ("k7", "X-Max-Tokens: +0\r\n"),
    ]
    .map(|(key, line)| {
        (0..5)
            .map(|i| delivered(&exchange_with(at(i), key, line, BIG)))
            .sum()
    });
    Attacks {
        burst,
        streams,
        headers,
    }
}

/// The tokens a call's answer delivered (0 unless admitted).
fn delivered(answer: &str) -> u64 {
    if status(answer) != 200 {
        return 0;
    }
    header(answer, "x-tokens-used").unwrap().parse().unwrap()
}

/// Each attack got at most `most`, and something; with `exact`, a zero
/// `x-max-tokens` bought what no header bought.
fn held_to(got: &Attacks, most: u64, exact: bool) {
    let Attacks {
        burst,
        streams,
        headers,
    } = got;
    assert!(*burst <= most, "50 overlapping calls delivered {burst}");
    assert!(*burst >= 40_000, "an admitted call delivers its 40,000");
    assert!(*streams <= most, "overlapping streams reserved {streams}");
    assert!(*streams >= 40_000, "a stream is admitted");
    assert!(headers.iter().all(|&h| h <= most), "{headers:?}");
    if exact {
        assert!(headers.iter().all(|&h| h == headers[0]), "{headers:?}");
    }
}

/// Opens a 40,000-token stream on `key`: its status, and the connection,
/// still open.
fn stream_head(addr: SocketAddr, key: &str) -> (u16, TcpStream) {
    let (head, s) = open_stream(addr, key, 40_000, |seen| seen.contains("\r\n\r\n"));
    (status(&head), s)
}

fn instance(redis: Option<&str>) -> Spawned {
    let mut cmd = example();
    cmd.env("API_KEYS", "k1,k2,k3,k4,k5,k6,k7,warm");
    if let Some(url) = redis {
        cmd.env("REDIS_URL", url)
            .env("RATELIMIT_CONFIG", crate::patient_redis_config());
    }
    Spawned::start(cmd)
}

#[test]
fn the_gateway_as_a_process_in_memory() {
    let app = instance(None);
    done_when(&[app.addr]);
    held_to(&attacks(&[app.addr]), 100_000, true);
}

#[test]
fn the_gateway_across_two_instances_on_one_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut apps = [instance(Some(&redis.url())), instance(Some(&redis.url()))];
    // Connect both instances' stores first (a first check slower than
    // the store's timeout decides in memory).
    for app in &apps {
        assert_eq!(status(&exchange(app.addr, "warm", r#"{"tokens": 1}"#)), 200);
    }
    done_when(&[apps[0].addr, apps[1].addr]);
    let got = attacks(&[apps[0].addr, apps[1].addr]);
    // A check slower than the store's timeout (2 s here, a very busy
    // host) is decided in the instance's memory: then the fallback's
    // bound, (k + 1) * L for k instances, is what holds
    // (docs/ALGORITHMS.md).
    let fell_back = apps.iter_mut().any(|app| {
        app.wait_for("redis gave no decision", Duration::from_millis(500))
            .is_some()
    });
    if fell_back {
        eprintln!("a check fell back to memory: holding to the fallback's bound");
        held_to(&got, 3 * 100_000, false);
    } else {
        held_to(&got, 100_000, true);
    }
}
