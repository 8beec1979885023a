//! `GET /download`: 1 MiB paced at 256 KiB/s per client IP; in process on tokio's paused clock, and as a process in real time (one client, then two clients from two addresses at once).

use crate::startup::{example, limits};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum_example::{app_on, Config, DOWNLOAD_BYTES};
use ratelimit_core::TokioClock;
use ratelimit_test_support::spawned::Spawned;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

/// (1 MiB - 64 KiB of burst) at 256 KiB/s.
const EXPECTED: f64 = 3.75;

async fn in_process_download(app: &axum::Router, peer: &str) -> (usize, Duration) {
    let start = tokio::time::Instant::now();
    let mut req = Request::get("/download").body(Body::empty()).unwrap();
    let peer: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let body = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    (body.len(), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_download_takes_its_time_per_client_in_process() {
    let config = Config {
        clock: Some(Arc::new(TokioClock::new())),
        ..Config::default()
    };
    let app = app_on(&limits(|_| None), &config).unwrap();
    let (a, b) = tokio::join!(
        in_process_download(&app, "203.0.113.7:1"),
        in_process_download(&app, "198.51.100.9:1"),
    );
    for (len, took) in [a, b] {
        assert_eq!(len, DOWNLOAD_BYTES);
        let took = took.as_secs_f64();
        assert!(
            (took - EXPECTED).abs() <= EXPECTED * 0.05,
            "took {took:.3} s"
        );
    }
}

/// Downloads from `addr`, connecting from `from` (a loopback address):
/// the body's length and the seconds it took.
async fn download(addr: SocketAddr, from: [u8; 4]) -> (usize, f64) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    let start = std::time::Instant::now();
    let mut stream = socket.connect(addr).await.unwrap();
    stream
        .write_all(b"GET /download HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let took = start.elapsed().as_secs_f64();
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &answer[..head_end]
    );
    (answer.len() - head_end - 4, took)
}

/// The "done when": one client's 1 MiB takes 3.5 to 5 s, and two
/// clients at once each take about as long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_takes_its_time_per_client_as_a_process() {
    let app = Spawned::start(example());
    let (len, took) = download(app.addr, [127, 0, 0, 1]).await;
    assert_eq!(len, DOWNLOAD_BYTES);
    assert!((3.5..=5.0).contains(&took), "one client: {took:.2} s");
    let (a, b) = tokio::join!(
        download(app.addr, [127, 0, 0, 2]),
        download(app.addr, [127, 0, 0, 3]),
    );
    for (len, took) in [a, b] {
        assert_eq!(len, DOWNLOAD_BYTES);
        assert!((3.5..=5.0).contains(&took), "two clients: {took:.2} s");
    }
}
