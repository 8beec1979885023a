//! Both example servers against slow and half-sent requests, over real
//! sockets. The clock is paused where the shipped 10 s timeouts are
//! checked: tokio moves it on whenever every task waits, so a test takes
//! milliseconds and a timeout that does not fire fails the bound.

use super::*;
use ::hyper_example::{service, Limits};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower_ratelimit::serve::ServeOptions;

/// The axum example served as `main` serves it, with `options`.
async fn start_axum(options: ServeOptions) -> (SocketAddr, JoinHandle<()>) {
    let limits = limits(|v| (v == "BIND_ADDR").then(|| "127.0.0.1:0".to_owned())).unwrap();
    let (setup, _) = config("");
    let server = limits.bind(app_on(&limits, &setup.config).unwrap()).await;
    let mut server = server.unwrap();
    *server.options_mut() = options;
    let addr = server.local_addr();
    (addr, tokio::spawn(server.run(std::future::pending())))
}

/// The hyper example served as `main` serves it, with `options`.
async fn start_hyper(options: ServeOptions) -> (SocketAddr, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = service(Limits::default()).unwrap();
    let server = tokio::spawn(::hyper_example::run(
        listener,
        svc,
        options,
        std::future::pending(),
    ));
    (addr, server)
}

/// Sends `bytes` on a new connection, then reads until the server closes
/// it: what it answered and when it closed. Panics if it is still open
/// after `bound`. (The server may close before all is written.)
pub(super) async fn closed_within(
    addr: SocketAddr,
    bytes: &[u8],
    bound: Duration,
) -> (String, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(bytes).await;
    let mut out = Vec::new();
    match tokio::time::timeout(bound, s.read_to_end(&mut out)).await {
        Ok(Ok(_)) => {}
        // A reset after the answer (unread bytes in the server's buffer).
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(Err(e)) => panic!("read failed: {e}"),
        Err(_) => panic!(
            "connection still open after {bound:?}; got {:?}",
            String::from_utf8_lossy(&out)
        ),
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

const HALF_HEAD: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
const SLOW_LOGIN: &[u8] =
    b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"username\"";

/// Each server closes a half-sent head, and a connection that sends
/// nothing, within the 10 s header read timeout: never before 10 s, and
/// well within 15 s.
#[tokio::test(start_paused = true)]
async fn half_sent_heads_are_closed_within_15_s() {
    let bound = Duration::from_secs(15);
    for (name, (addr, server)) in [
        ("axum", start_axum(ServeOptions::default()).await),
        ("hyper", start_hyper(Default::default()).await),
    ] {
        for sent in [HALF_HEAD, b""] {
            let (answer, took) = closed_within(addr, sent, bound).await;
            assert!(
                answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
                "{name}: {answer}"
            );
            assert!(
                took >= Duration::from_secs(10),
                "{name}: closed after {took:?}"
            );
        }
        server.abort();
    }
}

/// A body that stops coming is answered 408 when the 10 s request
/// timeout runs out, and the connection closed.
#[tokio::test(start_paused = true)]
async fn a_stalled_body_is_answered_408() {
    let (addr, server) = start_axum(ServeOptions::default()).await;
    let (answer, took) = closed_within(addr, SLOW_LOGIN, Duration::from_secs(15)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took >= Duration::from_secs(10), "{took:?}");
    server.abort();
}

/// The hyper example never reads bodies: it answers at once and closes
/// the connection instead of waiting for the rest (on the real clock:
/// within 5 s, where waiting would take the 10 s request timeout).
#[tokio::test]
async fn a_stalled_body_the_handler_ignores_is_answered_at_once() {
    let (addr, server) = start_hyper(Default::default()).await;
    let req = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc";
    let (answer, took) = closed_within(addr, req, Duration::from_secs(15)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    server.abort();
}

/// A declared 10 MB body with 1 KB sent: 413 at once, from both, before
/// reading the body (on the real clock: within 5 s, where waiting would
/// take the 10 s request timeout).
#[tokio::test]
async fn a_declared_too_large_body_is_answered_413_at_once() {
    for (name, (addr, server)) in [
        ("axum", start_axum(ServeOptions::default()).await),
        ("hyper", start_hyper(Default::default()).await),
    ] {
        for path in ["/login", "/accounts", "/"] {
            let mut req =
                format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
                    .into_bytes();
            req.extend_from_slice(&[b'x'; 1024]);
            let (answer, took) = closed_within(addr, &req, Duration::from_secs(15)).await;
            assert!(
                answer.starts_with("HTTP/1.1 413"),
                "{name} {path}: {answer}"
            );
            assert!(took < Duration::from_secs(5), "{name} {path}: {took:?}");
        }
        server.abort();
    }
}

/// A chunked body (no length declared) that grows past the limit: 413.
#[tokio::test]
async fn a_chunked_body_past_the_limit_is_413() {
    let options = ServeOptions {
        max_body_bytes: 100,
        ..ServeOptions::default()
    };
    let (addr, server) = start_axum(options).await;
    let req = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         c8\r\n{}\r\n0\r\n\r\n",
        "x".repeat(200)
    );
    let (answer, _) = closed_within(addr, req.as_bytes(), Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    server.abort();
}

/// The timeouts are settings: short ones on the real clock.
#[tokio::test]
async fn timeouts_follow_the_options_on_the_real_clock() {
    let options = ServeOptions {
        header_read_timeout: Duration::from_millis(200),
        request_timeout: Duration::from_millis(200),
        ..ServeOptions::default()
    };
    let (addr, server) = start_axum(options).await;
    let (_, took) = closed_within(addr, HALF_HEAD, Duration::from_secs(10)).await;
    assert!(took >= Duration::from_millis(200), "{took:?}");
    let (answer, took) = closed_within(addr, SLOW_LOGIN, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    // A complete request is still served.
    assert_eq!(http(addr, "GET", "/health", "").await.0, 200);
    server.abort();
}

/// Past `max_connections`, a new connection takes the place of the one
/// idle longest, closed at once; when none is idle (each has a request in
/// flight), it waits in the kernel's queue until one closes.
#[tokio::test]
async fn connections_beyond_the_cap_replace_idle_ones_or_wait() {
    let options = ServeOptions {
        max_connections: 2,
        request_timeout: Duration::from_secs(3),
        ..ServeOptions::default()
    };
    let (addr, server) = start_axum(options).await;
    let mut oldest = TcpStream::connect(addr).await.unwrap();
    let _newer = TcpStream::connect(addr).await.unwrap();
    let (status, _) =
        tokio::time::timeout(Duration::from_secs(10), http(addr, "GET", "/health", ""))
            .await
            .expect("served in place of an idle connection");
    assert_eq!(status, 200);
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), oldest.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "the connection idle longest is still open");
    // Two requests whose bodies stop coming: in flight until the 3 s
    // request timeout answers them 408.
    let stalled = [
        tokio::spawn(closed_within(addr, SLOW_LOGIN, Duration::from_secs(10))),
        tokio::spawn(closed_within(addr, SLOW_LOGIN, Duration::from_secs(10))),
    ];
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut next = tokio::spawn(http(addr, "GET", "/health", ""));
    let early = tokio::time::timeout(Duration::from_millis(300), &mut next).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    let (status, _) = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert_eq!(status, 200);
    for stalled in stalled {
        assert!(stalled.await.unwrap().0.starts_with("HTTP/1.1 408"));
    }
    server.abort();
}
