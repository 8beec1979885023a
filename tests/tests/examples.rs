//! The example apps probed as a client would: every route, status codes,
//! headers, limits per user / IP / key, proxies, concurrency.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::Router;
use axum_example::{app, Config};
use http_body_util::BodyExt;
use ratelimit_core::ManualClock;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

fn config(proxies: &str) -> (Config, ManualClock) {
    let clock = ManualClock::new();
    let mut config = Config::new(proxies).unwrap();
    config.clock = Arc::new(clock.clone());
    (config, clock)
}

struct Probe {
    method: &'static str,
    uri: &'static str,
    peer: &'static str,
    headers: Vec<(&'static str, Vec<u8>)>,
    body: &'static str,
}

fn probe(method: &'static str, uri: &'static str) -> Probe {
    Probe {
        method,
        uri,
        peer: "203.0.113.10:40000",
        headers: Vec::new(),
        body: "",
    }
}

impl Probe {
    fn from(mut self, peer: &'static str) -> Self {
        self.peer = peer;
        self
    }
    fn header(mut self, name: &'static str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name, value.as_ref().to_vec()));
        self
    }
    fn body(mut self, body: &'static str) -> Self {
        self.body = body;
        self
    }
    fn request(&self) -> Request<Body> {
        let mut b = Request::builder().method(self.method).uri(self.uri);
        for (n, v) in &self.headers {
            b = b.header(*n, axum::http::HeaderValue::from_bytes(v).unwrap());
        }
        let mut req = b.body(Body::from(self.body)).unwrap();
        let peer: SocketAddr = self.peer.parse().unwrap();
        req.extensions_mut().insert(ConnectInfo(peer));
        req
    }
    async fn send(&self, app: &Router) -> Reply {
        Reply::of(app.clone().oneshot(self.request()).await.unwrap()).await
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Reply {
    async fn of(res: Response<Body>) -> Self {
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        Self {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
    fn assert_429(&self) {
        assert_eq!(self.status, 429, "{self:?}");
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let retry: u64 = self.header("retry-after").unwrap().parse().unwrap();
        assert!(retry >= 1);
        assert_eq!(self.json()["status"], 429);
        assert!(self.header("ratelimit").unwrap().contains(";r=0;t="));
        assert!(self.header("ratelimit-policy").unwrap().contains(";q="));
    }
}

const LOGIN_OK: &str = r#"{"username":"alice","password":"open sesame"}"#;
const LOGIN_BAD: &str = r#"{"username":"alice","password":"guess"}"#;

#[tokio::test]
async fn health_is_never_limited() {
    let (c, _) = config("");
    let app = app(&c);
    for _ in 0..200 {
        let r = probe("GET", "/health").send(&app).await;
        assert_eq!(r.status, 200);
        assert!(r.header("ratelimit").is_none());
    }
}

#[tokio::test]
async fn unknown_routes_and_methods() {
    let (c, _) = config("");
    let app = app(&c);
    assert_eq!(probe("GET", "/nope").send(&app).await.status, 404);
    assert_eq!(probe("GET", "/tickets").send(&app).await.status, 405);
    assert_eq!(probe("DELETE", "/login").send(&app).await.status, 405);
    assert_eq!(probe("POST", "/health").send(&app).await.status, 405);
}

#[tokio::test]
async fn tickets_one_per_five_minutes_per_user() {
    let (c, clock) = config("");
    let app = app(&c);
    let alice = || probe("POST", "/tickets").header("authorization", "Bearer alice-token");
    let r = alice().send(&app).await;
    assert!(r.status == 200 || r.status == 201, "{r:?}");
    assert!(r.header("ratelimit").is_some());
    let r = alice().send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("300"));
    // Another user, even from the same IP, has a ticket of their own.
    let r = probe("POST", "/tickets")
        .header("authorization", "Bearer bob")
        .send(&app)
        .await;
    assert_eq!(r.status, 201);
    // The same user from another IP is still limited.
    alice().from("198.51.100.1:1").send(&app).await.assert_429();
    clock.advance(Duration::from_secs(299));
    let r = alice().send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("1"));
    clock.advance(Duration::from_secs(1));
    assert_eq!(alice().send(&app).await.status, 201);
}

#[tokio::test]
async fn tickets_without_a_token_are_401() {
    let (c, _) = config("");
    let app = app(&c);
    let bad: [&[u8]; 7] = [
        b"Basic YWxpY2U6cHc=",
        b"Bearer",
        b"Bearer ",
        b"",
        b"Bearer a b",
        b"Bearer \xff",
        b"token",
    ];
    for _ in 0..3 {
        let r = probe("POST", "/tickets").send(&app).await;
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
        for v in bad {
            let r = probe("POST", "/tickets")
                .header("authorization", v)
                .send(&app)
                .await;
            assert_eq!(r.status, 401, "{v:?}");
        }
    }
}

#[tokio::test]
async fn accounts_two_per_day_per_client_ip() {
    let (c, clock) = config("");
    let app = app(&c);
    let from = |peer| probe("POST", "/accounts").from(peer);
    assert_eq!(from("192.0.2.1:1").send(&app).await.status, 201);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(from("192.0.2.1:2").send(&app).await.status, 201);
    let r = from("192.0.2.1:3").send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("82800"));
    assert_eq!(from("192.0.2.2:1").send(&app).await.status, 201);
    // Spoofed headers from a direct client change nothing.
    let r = from("192.0.2.1:4")
        .header("x-forwarded-for", "1.2.3.4")
        .send(&app)
        .await;
    assert_eq!(r.status, 429);
    clock.advance(Duration::from_secs(82_800));
    assert_eq!(from("192.0.2.1:5").send(&app).await.status, 201);
    assert_eq!(from("192.0.2.1:5").send(&app).await.status, 429);
}

#[tokio::test]
async fn accounts_behind_trusted_proxies() {
    let (c, _) = config("10.0.0.0/8, fd00::/8");
    let app = app(&c);
    let via = |xff: &'static str| {
        probe("POST", "/accounts")
            .from("10.1.2.3:5555")
            .header("x-forwarded-for", xff)
    };
    assert_eq!(via("198.51.100.7").send(&app).await.status, 201);
    assert_eq!(via("6.6.6.6, 198.51.100.7").send(&app).await.status, 201);
    // Forged leftmost entries do not reset the limit.
    via("7.7.7.7, 198.51.100.7, 10.9.9.9")
        .send(&app)
        .await
        .assert_429();
    assert_eq!(via("198.51.100.8").send(&app).await.status, 201);
    // IPv6 clients share a /64.
    assert_eq!(via("2001:db8:1:1::1").send(&app).await.status, 201);
    assert_eq!(via("2001:db8:1:1::2").send(&app).await.status, 201);
    via("2001:db8:1:1:ffff::3").send(&app).await.assert_429();
    // Garbage where the client address should be: 400, never 5xx.
    for bad in ["garbage", "10.0.0.1, nonsense", "1.2.3.4.5"] {
        let r = via(bad).send(&app).await;
        assert_eq!(r.status, 400, "{bad:?}");
    }
    // Empty list elements are skipped; with no address left, the request
    // is the proxy's own.
    assert_eq!(via("198.51.100.30, ,").send(&app).await.status, 201);
    assert_eq!(via("").send(&app).await.status, 201);
    assert_eq!(via(" , ").send(&app).await.status, 201);
    via(",").send(&app).await.assert_429();
    // RFC 7239 Forwarded from a trusted proxy that sends no X-Forwarded-For.
    let fwd = |v: &'static str| {
        probe("POST", "/accounts")
            .from("10.1.2.3:5555")
            .header("forwarded", v)
    };
    assert_eq!(fwd("for=198.51.100.20").send(&app).await.status, 201);
    assert_eq!(
        fwd("for=9.9.9.9, for=\"198.51.100.20:4711\"")
            .send(&app)
            .await
            .status,
        201
    );
    fwd("for=198.51.100.20;proto=https")
        .send(&app)
        .await
        .assert_429();
    // A proxy that hides the client (`unknown`, `_obfuscated`, no `for=`):
    // keyed by that proxy, whose two accounts are used up above.
    for hidden in [
        "for=unknown",
        "for=_hidden",
        "proto=https",
        "for=\"unknown:_p\"",
    ] {
        fwd(hidden).send(&app).await.assert_429();
    }
    assert_eq!(fwd("for=_").send(&app).await.status, 400);
    // Untrusted peers' headers are ignored.
    let direct = || probe("POST", "/accounts").from("198.51.100.9:1");
    assert_eq!(
        direct()
            .header("x-forwarded-for", "1.1.1.1")
            .send(&app)
            .await
            .status,
        201
    );
    assert_eq!(
        direct()
            .header("x-forwarded-for", "2.2.2.2")
            .send(&app)
            .await
            .status,
        201
    );
    assert_eq!(
        direct()
            .header("x-forwarded-for", "3.3.3.3")
            .send(&app)
            .await
            .status,
        429
    );
}

#[tokio::test]
async fn login_counts_only_failures() {
    let (c, clock) = config("");
    let app = app(&c);
    let login = |body| probe("POST", "/login").from("192.0.2.30:1").body(body);
    // Successes and malformed bodies do not count.
    for _ in 0..10 {
        let r = login(LOGIN_OK).send(&app).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    for bad in ["", "not json", "{}", r#"{"username":"a"}"#] {
        assert_eq!(login(bad).send(&app).await.status, 400, "{bad:?}");
    }
    // Content type does not matter.
    let r = login(LOGIN_OK)
        .header("content-type", "application/json")
        .send(&app)
        .await;
    assert_eq!(r.status, 200);
    for _ in 0..5 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    login(LOGIN_BAD).send(&app).await.assert_429();
    let r = login(LOGIN_OK).send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("3600"));
    // Another client is unaffected.
    assert_eq!(
        login(LOGIN_OK).from("192.0.2.31:1").send(&app).await.status,
        200
    );
    clock.advance(Duration::from_secs(3600));
    assert_eq!(login(LOGIN_OK).send(&app).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn login_concurrent_failures_at_most_five_reach_the_check() {
    let (c, _) = config("");
    let app = app(&c);
    let mut tasks = Vec::new();
    for _ in 0..60 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            probe("POST", "/login")
                .from("192.0.2.40:1")
                .body(LOGIN_BAD)
                .send(&app)
                .await
                .status
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|&&c| c == 401).count(), 5);
    assert_eq!(codes.iter().filter(|&&c| c == 429).count(), 55);
}

#[tokio::test]
async fn api_items_with_key_token_bucket() {
    let (c, clock) = config("");
    let app = app(&c);
    let with_key = |k: &'static str| probe("GET", "/api/items").header("x-api-key", k);
    for i in 0..500 {
        let r = with_key("key-1").send(&app).await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = with_key("key-1").send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.header("ratelimit-policy").unwrap().contains("q=500"));
    // Another key has its own bucket; the IP limit does not apply to keys.
    assert_eq!(with_key("key-2").send(&app).await.status, 200);
    // 100 per second refill: 10 ms buys one request.
    clock.advance(Duration::from_millis(10));
    assert_eq!(with_key("key-1").send(&app).await.status, 200);
    assert_eq!(with_key("key-1").send(&app).await.status, 429);
    clock.advance(Duration::from_secs(1));
    for _ in 0..100 {
        assert_eq!(with_key("key-1").send(&app).await.status, 200);
    }
    assert_eq!(with_key("key-1").send(&app).await.status, 429);
    // Malformed keys: 400.
    for bad in [&b"a b"[..], b"\xff\xfe", &[b'k'; 300]] {
        let r = probe("GET", "/api/items")
            .header("x-api-key", bad)
            .send(&app)
            .await;
        assert_eq!(r.status, 400);
    }
}

#[tokio::test]
async fn api_items_anonymous_ten_per_minute_per_ip() {
    let (c, clock) = config("");
    let app = app(&c);
    let anon = |peer| probe("GET", "/api/items").from(peer);
    for _ in 0..10 {
        let r = anon("192.0.2.60:1").send(&app).await;
        assert_eq!(r.status, 200);
        assert!(r.json()["items"].is_array());
    }
    let r = anon("192.0.2.60:1").send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("6"));
    // A blank key is no key.
    anon("192.0.2.60:1")
        .header("x-api-key", "  ")
        .send(&app)
        .await
        .assert_429();
    // Keyed requests from the same IP are not affected.
    let r = anon("192.0.2.60:1")
        .header("x-api-key", "k")
        .send(&app)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(anon("192.0.2.61:1").send(&app).await.status, 200);
    clock.advance(Duration::from_secs(6));
    assert_eq!(anon("192.0.2.60:1").send(&app).await.status, 200);
    assert_eq!(anon("192.0.2.60:1").send(&app).await.status, 429);
}

/// A raw HTTP/1.1 request over a real socket.
async fn http(addr: SocketAddr, method: &str, path: &str, extra: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

#[tokio::test]
async fn axum_example_over_a_real_socket() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = app(&Config::default()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    assert_eq!(http(addr, "GET", "/health", "").await.0, 200);
    assert_eq!(http(addr, "POST", "/accounts", "").await.0, 201);
    assert_eq!(http(addr, "POST", "/accounts", "").await.0, 201);
    let (status, text) = http(addr, "POST", "/accounts", "X-Forwarded-For: 1.2.3.4\r\n").await;
    assert_eq!(status, 429);
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 86400"),
        "{text}"
    );
    assert_eq!(http(addr, "POST", "/tickets", "").await.0, 401);
    server.abort();
}

mod hyper_app {
    use super::*;
    use ::hyper_example::{service, Limits};
    use bytes::Bytes;
    use http_body_util::Full;
    use tower_ratelimit::key::PeerAddr;

    const HOUR: Duration = Duration::from_secs(3600);

    async fn call(svc: &::hyper_example::Service<Full<Bytes>>, peer: &str) -> u16 {
        let mut req = Request::get("/").body(Full::new(Bytes::new())).unwrap();
        req.extensions_mut().insert(PeerAddr(peer.parse().unwrap()));
        svc.clone().oneshot(req).await.unwrap().status().as_u16()
    }

    #[tokio::test]
    async fn per_ip_and_global_limits() {
        let svc = service(Limits {
            global: 1000,
            global_window: HOUR,
            per_ip: 3,
            per_ip_window: HOUR,
        })
        .unwrap();
        let codes: Vec<u16> = futures_codes(&svc, "192.0.2.1:1", 5).await;
        assert_eq!(codes, [200, 200, 200, 429, 429]);
        assert_eq!(call(&svc, "192.0.2.2:1").await, 200);

        let svc = service(Limits {
            global: 4,
            global_window: HOUR,
            per_ip: 100,
            per_ip_window: HOUR,
        })
        .unwrap();
        let mut ok = 0;
        for i in 0..10 {
            let peer = format!("192.0.2.{}:1", i + 10);
            ok += usize::from(call(&svc, &peer).await == 200);
        }
        assert_eq!(ok, 4);
    }

    /// The defaults are the README's daily cap (200 per day per IP)
    /// and GitHub's window (5,000 per hour for everyone).
    #[tokio::test]
    async fn default_limits_are_a_daily_cap_and_githubs_hourly_window() {
        let svc = service(Limits::default()).unwrap();
        let codes = futures_codes(&svc, "192.0.2.1:1", 201).await;
        assert!(codes[..200].iter().all(|c| *c == 200));
        assert_eq!(codes[200], 429);
        // 4,800 more from other clients fill the global hour exactly.
        let mut ok = 0;
        for i in 0..4_801u32 {
            let peer = format!("10.{}.{}.1:1", i / 250, i % 250);
            ok += usize::from(call(&svc, &peer).await == 200);
        }
        assert_eq!(ok, 4_800);
    }

    async fn futures_codes(
        svc: &::hyper_example::Service<Full<Bytes>>,
        peer: &str,
        n: usize,
    ) -> Vec<u16> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(call(svc, peer).await);
        }
        v
    }

    #[tokio::test]
    async fn over_a_real_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = service(Limits {
            global: 1000,
            global_window: HOUR,
            per_ip: 2,
            per_ip_window: HOUR,
        })
        .unwrap();
        let server = tokio::spawn(async move {
            loop {
                let (stream, peer) = listener.accept().await.unwrap();
                tokio::spawn(::hyper_example::serve_connection(stream, peer, svc.clone()));
            }
        });
        assert_eq!(http(addr, "GET", "/", "").await.0, 200);
        assert_eq!(http(addr, "GET", "/", "").await.0, 200);
        let (status, text) = http(addr, "GET", "/", "").await;
        assert_eq!(status, 429);
        assert!(text.contains("application/problem+json"));
        server.abort();
    }
}

#[path = "examples/on_redis.rs"]
mod on_redis;
