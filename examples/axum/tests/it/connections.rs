//! The app's connections over real sockets: HTTP/2 cleartext (prior
//! knowledge) on the HTTP/1.1 port, limited alike, its streams and
//! buffers bounded; idle connections closed, whatever their protocol; the
//! cap on one client's connections.

use axum::body::Bytes;
use axum_example::{app_on, Config, DOWNLOAD_BYTES};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower_ratelimit::serve::ServeOptions;

/// The app served as `main` serves it (`Limits::serve`), with `options`.
async fn start(options: ServeOptions) -> (SocketAddr, JoinHandle<()>) {
    let limits = crate::startup::limits(|var| (var == "BIND_ADDR").then(|| "127.0.0.1:0".into()));
    let app = app_on(&limits, &Config::default()).unwrap();
    let mut bound = limits.bind(app).await.unwrap();
    *bound.options_mut() = options;
    let addr = bound.local_addr();
    (addr, tokio::spawn(bound.run(std::future::pending())))
}

/// A connection to `addr` from the loopback address `from` (Linux
/// answers on all of 127.0.0.0/8): a client of its own.
async fn connect_from(from: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    socket.connect(addr).await.expect("connect")
}

/// An HTTP/2 connection with prior knowledge from `from`, and the task
/// that drives it (it ends when the server closes the connection).
async fn h2(
    from: [u8; 4],
    addr: SocketAddr,
) -> (SendRequest<Empty<Bytes>>, JoinHandle<hyper::Result<()>>) {
    let stream = connect_from(from, addr).await;
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 handshake");
    (send, tokio::spawn(conn))
}

/// `GET path` as one HTTP/2 stream: the status and the body.
async fn h2_get(send: &SendRequest<Empty<Bytes>>, path: &str) -> (u16, Bytes) {
    let req = hyper::Request::get(format!("http://localhost{path}"))
        .body(Empty::new())
        .unwrap();
    let res = send.clone().send_request(req).await.expect("an answer");
    assert_eq!(res.version(), hyper::Version::HTTP_2);
    let status = res.status().as_u16();
    (status, res.into_body().collect().await.unwrap().to_bytes())
}

/// `GET path` over HTTP/1.1 on a new connection from `from`: the status.
async fn h1_get(from: [u8; 4], addr: SocketAddr, path: &str) -> u16 {
    let mut s = connect_from(from, addr).await;
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// Reads `s` until the server closes it, at most `bound`: how long that
/// took, or `None` if it is still open.
async fn closed_within(s: &mut TcpStream, bound: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut sink = Vec::new();
    match tokio::time::timeout(bound, s.read_to_end(&mut sink)).await {
        Ok(_) => Some(start.elapsed()),
        Err(_) => None,
    }
}

/// The anonymous limit of `GET /api/items` (10 per minute per client IP)
/// refuses the 11th request over HTTP/2, as over HTTP/1.1: each stream is
/// a request, counted for the connection's peer, even when all are sent
/// at once on one connection.
#[tokio::test]
async fn h2c_is_served_and_limited_like_http1() {
    let (addr, server) = start(ServeOptions::default()).await;
    let mut h1 = Vec::new();
    for _ in 0..15 {
        h1.push(h1_get([127, 0, 0, 3], addr, "/api/items").await);
    }
    let (send, _conn) = h2([127, 0, 0, 4], addr).await;
    assert_eq!(h2_get(&send, "/health").await, (200, Bytes::from("ok")));
    let streams: Vec<_> = (0..15)
        .map(|_| {
            let send = send.clone();
            tokio::spawn(async move { h2_get(&send, "/api/items").await.0 })
        })
        .collect();
    let mut over_h2 = Vec::new();
    for stream in streams {
        over_h2.push(stream.await.unwrap());
    }
    let admitted = |codes: &[u16]| codes.iter().filter(|&&c| c == 200).count();
    assert_eq!(admitted(&h1), 10, "HTTP/1.1: {h1:?}");
    assert_eq!(admitted(&over_h2), 10, "HTTP/2: {over_h2:?}");
    assert!(over_h2.iter().all(|&c| c == 200 || c == 429), "{over_h2:?}");
    // Keyed by the client's address: another one is admitted.
    let (other, _conn) = h2([127, 0, 0, 5], addr).await;
    assert_eq!(h2_get(&other, "/api/items").await.0, 200);
    server.abort();
}

fn short_idle() -> ServeOptions {
    ServeOptions {
        idle_timeout: Duration::from_millis(300),
        ..ServeOptions::default()
    }
}

/// With a 300 ms idle timeout (the header read timeout left at 10 s), an
/// HTTP/2 connection after its last response, a connection that sent
/// nothing and an HTTP/1.1 keep-alive connection are all closed: never
/// before 300 ms, and well within 5 s.
#[tokio::test]
async fn idle_connections_are_closed_whatever_their_protocol() {
    let (addr, server) = start(short_idle()).await;
    let bound = Duration::from_secs(5);
    let (send, conn) = h2([127, 0, 0, 6], addr).await;
    // The server's idle time starts once its answer is sent, after this
    // instant and before the client reads it: measured from here, the
    // close comes no sooner than the timeout.
    let asked = Instant::now();
    assert_eq!(h2_get(&send, "/health").await.0, 200);
    let ended = tokio::time::timeout(bound, conn).await;
    assert!(
        ended.is_ok(),
        "HTTP/2 connection still open after {bound:?}"
    );
    assert!(asked.elapsed() >= Duration::from_millis(300));

    // Likewise from before the connection is made.
    let connecting = Instant::now();
    let mut silent = connect_from([127, 0, 0, 6], addr).await;
    let took = closed_within(&mut silent, bound).await;
    assert!(took.is_some(), "a silent connection still open");
    let took = connecting.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");

    let mut kept = connect_from([127, 0, 0, 6], addr).await;
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0; 12];
    kept.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let took = closed_within(&mut kept, bound).await;
    assert!(took.is_some(), "HTTP/1.1 keep-alive connection still open");
    server.abort();
}

/// A request is in flight until its response is sent: a paced download
/// (about 3.75 s) outlives a 300 ms idle timeout, on HTTP/2 as on
/// HTTP/1.1.
#[tokio::test]
async fn a_long_response_is_not_idle() {
    let (addr, server) = start(short_idle()).await;
    let (send, _conn) = h2([127, 0, 0, 7], addr).await;
    let h2 = tokio::spawn(async move { h2_get(&send, "/download").await });
    let mut s = connect_from([127, 0, 0, 8], addr).await;
    s.write_all(b"GET /download HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut h1 = Vec::new();
    s.read_to_end(&mut h1).await.unwrap();
    assert!(h1.starts_with(b"HTTP/1.1 200"));
    assert!(h1.len() > DOWNLOAD_BYTES, "{} bytes", h1.len());
    let (status, body) = h2.await.unwrap();
    assert_eq!((status, body.len()), (200, DOWNLOAD_BYTES));
    server.abort();
}

/// `max_connections_per_client: 3`: a fourth connection from one address
/// is closed at once, unanswered, while its three others are served and
/// another address still connects.
#[tokio::test]
async fn a_fourth_connection_from_one_client_is_closed() {
    let options = ServeOptions {
        max_connections_per_client: 3,
        ..ServeOptions::default()
    };
    let (addr, server) = start(options).await;
    let mut three = Vec::new();
    for _ in 0..3 {
        three.push(h2([127, 0, 0, 9], addr).await.0);
    }
    let mut fourth = connect_from([127, 0, 0, 9], addr).await;
    let closed = closed_within(&mut fourth, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "a fourth connection is served");
    assert_eq!(h1_get([127, 0, 0, 10], addr, "/health").await, 200);
    for send in &three {
        assert_eq!(h2_get(send, "/health").await.0, 200);
    }
    server.abort();
}

/// The server's first HTTP/2 SETTINGS frame bounds each connection: at
/// most 100 streams at once, a 64 KiB window per stream.
#[tokio::test]
async fn h2_settings_bound_streams_and_buffers() {
    let (addr, server) = start(ServeOptions::default()).await;
    let mut s = connect_from([127, 0, 0, 11], addr).await;
    // The client preface and an empty SETTINGS frame.
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut head = [0; 9];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut head))
        .await
        .expect("a SETTINGS frame")
        .unwrap();
    assert_eq!(head[3], 4, "not a SETTINGS frame: {head:?}");
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0; len];
    s.read_exact(&mut payload).await.unwrap();
    let setting = |id: u16| {
        payload.chunks(6).find_map(|c| {
            (u16::from_be_bytes([c[0], c[1]]) == id)
                .then(|| u32::from_be_bytes([c[2], c[3], c[4], c[5]]))
        })
    };
    assert_eq!(setting(0x3), Some(100), "SETTINGS_MAX_CONCURRENT_STREAMS");
    assert_eq!(setting(0x4), Some(65_536), "SETTINGS_INITIAL_WINDOW_SIZE");
    server.abort();
}
