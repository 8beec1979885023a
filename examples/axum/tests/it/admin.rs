//! The admin API against an attacker: a network is never taken as one
//! address's key; wrong tokens are limited per source and across all
//! sources, yet a source that never failed gets in with the right token;
//! the admin listener closes slow and idle connections and caps them. In
//! process, on tokio's paused clock.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use axum_example::{app_on, Config};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt;
use tower_ratelimit::deploy::{
    Limits, WRONG_TOKENS_ALL_SOURCES as ALL_SOURCES, WRONG_TOKENS_PER_SOURCE as PER_SOURCE,
};

const TOKEN: &str = "admin-token-0123456789";

/// The shipped limits applied to the app, with the admin API on (a free
/// port, `TOKEN`) and the app on a free port.
fn limits() -> Limits {
    crate::startup::limits(|var| match var {
        "ADMIN_ADDR" | "BIND_ADDR" => Some("127.0.0.1:0".to_owned()),
        "ADMIN_TOKEN" => Some(TOKEN.to_owned()),
        _ => None,
    })
}

fn api() -> Router {
    let limits = limits();
    let _app = app_on(&limits, &Config::default()).unwrap();
    limits.admin_router().unwrap()
}

/// An admin request from `peer` with `token`: its status and body.
async fn send(
    api: &Router,
    peer: &str,
    token: &str,
    method: &str,
    uri: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(body.to_owned()))
        .unwrap();
    let peer: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    let res = api.clone().oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// A ban, an unban or a reset of a network on a per-address limit is
/// 400 naming the limit, never a silent act on the network's first
/// address; on a per-network limit a network of its length, or an
/// address in it, is its key; an IPv6 address is its /64.
#[tokio::test]
async fn a_network_is_not_one_clients_key() {
    let api = api();
    let admin = |method: &'static str, uri: String, body: &'static str| {
        let api = api.clone();
        async move { send(&api, "127.0.0.1:1", TOKEN, method, &uri, body).await }
    };
    for net in ["198.51.100.0%2F24", "2001%3Adb8%3A%3A%2F48"] {
        for (method, path, body) in [
            ("PUT", "bans", "{\"for\": \"1h\"}"),
            ("DELETE", "bans", ""),
            ("DELETE", "keys", ""),
            ("GET", "keys", ""),
        ] {
            let uri = format!("/limits/login-failures/{path}/{net}");
            let (status, body) = admin(method, uri, body).await;
            assert_eq!(status, 400, "{method} {path} {net}: {body}");
            let detail = body["detail"].as_str().unwrap();
            assert!(
                detail.contains("\"login-failures\"") && detail.contains("not one client's key"),
                "{detail}"
            );
        }
    }
    // An app key that is an address (the anonymous clients' limit) too.
    let uri = "/limits/anonymous/bans/198.51.100.0%2F24".to_owned();
    let (status, body) = admin("PUT", uri, "{\"for\": \"1h\"}").await;
    assert_eq!(status, 400, "{body}");
    // Nothing was banned: the network's first address is free.
    let (status, body) = admin("GET", "/limits/login-failures/keys/198.51.100.0".into(), "").await;
    assert_eq!(status, 200, "{body}");
    assert!(body["banned_seconds"].is_null(), "{body}");
    // The per-network limit: the network itself, or an address in it.
    for key in ["198.51.100.0%2F24", "198.51.100.77"] {
        let uri = format!("/limits/login-failures-network/bans/{key}");
        let (status, body) = admin("PUT", uri, "{\"for\": \"1h\"}").await;
        assert_eq!(status, 200, "{key}: {body}");
    }
    let uri = "/limits/login-failures-network/keys/198.51.100.9".to_owned();
    let (_, body) = admin("GET", uri, "").await;
    assert_eq!(body["key"], "198.51.100.0/24", "{body}");
    assert!(body["banned_seconds"].as_f64().unwrap() > 3000.0, "{body}");
    // An IPv6 address on a per-/64 limit is its /64, as the layer keys it.
    let uri = "/limits/login-failures/keys/2001%3Adb8%3A1%3A2%3A3%3A4%3A5%3A6".to_owned();
    let (status, body) = admin("GET", uri, "").await;
    assert_eq!((status, &body["key"]), (200, &"2001:db8:1:2::/64".into()));
}

/// 50 source addresses sending 10 wrong tokens each at once: at most
/// `ALL_SOURCES` of them, plus one per source once those are spent, are
/// compared (401); the rest get 429. Then a source that never failed is
/// let in with the right token at once, a failing one is not (its token
/// is not compared), and a minute later every source is.
#[tokio::test(start_paused = true)]
async fn wrong_tokens_are_limited_across_all_sources() {
    let api = api();
    let guesses = (0..50).flat_map(|s| {
        let api = api.clone();
        (0..PER_SOURCE).map(move |_| {
            let api = api.clone();
            async move {
                let peer = format!("127.0.0.{}:4000", s + 1);
                send(&api, &peer, "wrong-token-0123456789", "GET", "/limits", "").await
            }
        })
    });
    let answers = futures_util::future::join_all(guesses).await;
    let compared = answers.iter().filter(|(s, _)| *s == 401).count() as u64;
    let refused = answers.iter().filter(|(s, _)| *s == 429).count() as u64;
    assert_eq!(compared + refused, 50 * PER_SOURCE);
    // 500 guesses, at most 80 of them compared (30 + 50).
    assert!(
        compared <= ALL_SOURCES + 50 && compared <= 80,
        "{compared} compared"
    );
    // A source that never failed: in, while all sources' budget is spent.
    let (status, body) = send(&api, "127.0.0.200:1", TOKEN, "GET", "/limits", "").await;
    assert_eq!(status, 200, "{body}");
    // A source that failed: refused, the right token too, until its
    // failures are a minute old.
    let (status, _) = send(&api, "127.0.0.50:1", TOKEN, "GET", "/limits", "").await;
    assert_eq!(status, 429);
    tokio::time::advance(Duration::from_secs(61)).await;
    for s in [1, 50] {
        let peer = format!("127.0.0.{s}:1");
        let (status, _) = send(&api, &peer, TOKEN, "GET", "/limits", "").await;
        assert_eq!(status, 200, "{peer}");
    }
}

/// 10 wrong tokens from one address refuse that address for a minute,
/// the right token too (else its guesses would go on); another address
/// is let in at once, and the right token never counts as a failure.
#[tokio::test(start_paused = true)]
async fn a_source_that_never_failed_is_never_locked_out() {
    let api = api();
    for _ in 0..PER_SOURCE {
        let (status, _) = send(
            &api,
            "127.0.0.1:1",
            "wrong-token-0123456789",
            "GET",
            "/limits",
            "",
        )
        .await;
        assert_eq!(status, 401);
    }
    let (status, body) = send(&api, "127.0.0.1:2", TOKEN, "GET", "/limits", "").await;
    assert_eq!(status, 429, "{body}");
    for _ in 0..3 * PER_SOURCE {
        let (status, body) = send(&api, "127.0.0.2:1", TOKEN, "GET", "/limits", "").await;
        assert_eq!(status, 200, "{body}");
    }
    // Right tokens leave the failure budget whole.
    for _ in 0..PER_SOURCE {
        let (status, _) = send(&api, "127.0.0.2:1", "wrong", "GET", "/limits", "").await;
        assert_eq!(status, 401);
    }
}

/// A request head not sent whole, or a kept-alive connection left idle,
/// is closed after 10 s; past 64 connections the one idle longest is
/// closed to make room for the 65th (the server's shedding), so idle
/// connections cannot keep the admin out.
#[tokio::test(start_paused = true)]
async fn the_admin_listener_closes_slow_and_idle_connections() {
    let limits = limits();
    let app = app_on(&limits, &Config::default()).unwrap();
    let server = limits.bind(app).await.unwrap();
    let addr = server.admin_local_addr().unwrap();
    tokio::spawn(server.run(std::future::pending()));
    let request =
        format!("GET /limits HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    // Half a head.
    let start = Instant::now();
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /limits HTTP/1.1\r\nhost: a\r\n")
        .await
        .unwrap();
    assert_closed_after(&mut slow, start).await;
    // A whole request, then idle.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    let start = Instant::now();
    assert_closed_after(&mut idle, start).await;
    // On the real clock from here: a paused one would jump to the next
    // 10 s timeout whenever the kernel had not yet handed a loopback
    // packet over, and close the held connections as idle.
    tokio::time::resume();
    // 64 connections saying nothing take every slot.
    let mut held = Vec::new();
    for _ in 0..64 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    let mut late = TcpStream::connect(addr).await.unwrap();
    late.write_all(request.as_bytes()).await.unwrap();
    let n = late.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(5), "served after {waited:?}");
}

/// `stream` is closed by the server 10 s (of tokio's clock) after `start`,
/// not before, and within 30 s.
async fn assert_closed_after(stream: &mut TcpStream, start: Instant) {
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await;
    let n = read.expect("closed within 30 s").unwrap_or(0);
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(10),
        "closed after {elapsed:?}"
    );
    // Closed: nothing, or hyper's 408 for a half-sent head, then nothing.
    if n > 0 {
        let rest = stream.read(&mut buf).await.unwrap_or(0);
        assert_eq!(rest, 0, "still open");
    }
}
