//! The example apps probed as a client would: every route, status codes,
//! headers, limits per user / IP / key, proxies, concurrency.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::Router;
use axum_example::{app_on, ApiKeys, Config};
use http_body_util::BodyExt;
use ratelimit_core::ManualClock;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;
use tower_ratelimit::deploy::{DeployError, Limits};

/// The API keys the tests' apps accept (`API_KEYS`).
fn test_keys() -> ApiKeys {
    ApiKeys::parse("key-1, key-2, key-9, k").unwrap()
}

/// A test's app: its own settings, and the proxies it trusts
/// (`TRUSTED_PROXIES`).
#[derive(Clone, Default)]
struct Setup {
    config: Config,
    proxies: &'static str,
}

fn config(proxies: &'static str) -> (Setup, ManualClock) {
    let clock = ManualClock::new();
    let config = Config {
        api_keys: test_keys(),
        clock: Some(Arc::new(clock.clone())),
    };
    (Setup { config, proxies }, clock)
}

/// The shipped limits with `var` as the environment.
fn limits(var: impl Fn(&str) -> Option<String>) -> Result<Limits, DeployError> {
    Limits::from_toml(axum_example::DEFAULT_POLICY, None, var)
}

/// The app as `main` builds it, in memory.
fn app(setup: &Setup) -> Router {
    let proxies = setup.proxies;
    let var = move |v: &str| (v == "TRUSTED_PROXIES").then(|| proxies.to_owned());
    app_on(&limits(var).unwrap(), &setup.config).unwrap()
}

/// The app with its limits on the Redis at `url`, under the prefix
/// `axum-example:` (a check waits for it `timeout`, else the default
/// 50 ms; then it decides in memory).
fn app_on_redis(setup: &Setup, url: &str, timeout: Option<Duration>) -> Router {
    let timeout = timeout.map_or(50, |t| t.as_millis());
    let memory = "[store]\nkind = \"memory\"\nmax-keys = 1000000\n";
    let redis = format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\ntimeout = \"{timeout}ms\"\n\
         prefix = \"axum-example:\"\nfallback-max-keys = 1000000\n"
    );
    assert!(axum_example::DEFAULT_POLICY.contains(memory));
    let text = axum_example::DEFAULT_POLICY.replace(memory, &redis);
    let proxies = setup.proxies;
    let var = move |v: &str| (v == "TRUSTED_PROXIES").then(|| proxies.to_owned());
    let limits = Limits::from_toml(&text, None, var).unwrap();
    app_on(&limits, &setup.config).unwrap()
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
async fn tickets_without_a_token_are_401_with_a_bad_one_400() {
    let (c, _) = config("");
    let app = app(&c);
    let missing: [&[u8]; 5] = [b"Basic YWxpY2U6cHc=", b"Bearer", b"Bearer ", b"", b"token"];
    // RFC 6750, 3.1: a malformed token is an invalid request.
    let malformed: [&[u8]; 3] = [b"Bearer a b", b"Bearer \xff", b"Bearer a=b"];
    let ticket = |v: &[u8]| probe("POST", "/tickets").header("authorization", v);
    for _ in 0..3 {
        let r = probe("POST", "/tickets").send(&app).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        for v in missing {
            let r = ticket(v).send(&app).await;
            assert_eq!(r.status, 401, "{v:?}");
            assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{v:?}");
        }
        for v in malformed {
            let r = ticket(v).send(&app).await;
            assert_eq!(r.status, 400, "{v:?}");
            let challenge = r.header("www-authenticate");
            assert_eq!(challenge, Some("Bearer error=\"invalid_request\""), "{v:?}");
        }
        let r = probe("POST", "/tickets")
            .header("authorization", "Bearer a")
            .header("authorization", "Bearer b")
            .send(&app)
            .await;
        assert_eq!(r.status, 400);
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
    // Forwarded is not read unless configured: the request is the proxy's,
    // whose two accounts are used up above.
    probe("POST", "/accounts")
        .from("10.1.2.3:5555")
        .header("forwarded", "for=198.51.100.40")
        .send(&app)
        .await
        .assert_429();
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

/// The environment `TRUSTED_PROXIES=proxies`, `TRUSTED_PROXY_HEADER=header`.
fn vars(proxies: &'static str, header: &'static str) -> impl Fn(&str) -> Option<String> {
    move |name: &str| match name {
        "TRUSTED_PROXIES" => Some(proxies.to_owned()),
        "TRUSTED_PROXY_HEADER" => Some(header.to_owned()),
        _ => None,
    }
}

/// The app configured as by `TRUSTED_PROXIES=10.0.0.0/8` and
/// `TRUSTED_PROXY_HEADER=header`.
fn behind(header: &'static str) -> Router {
    let c = Config {
        clock: Some(Arc::new(ManualClock::new())),
        ..Config::default()
    };
    app_on(&limits(vars("10.0.0.0/8", header)).unwrap(), &c).unwrap()
}

#[tokio::test]
async fn accounts_behind_forwarded_proxies() {
    let app = behind("Forwarded");
    // RFC 7239 Forwarded from a trusted proxy.
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
    // A forged X-Forwarded-For changes nothing.
    fwd("for=198.51.100.20")
        .header("x-forwarded-for", "6.6.6.6")
        .send(&app)
        .await
        .assert_429();
    // Bytes the client wrote left of its address are never read.
    fwd("for=\"\u{e9}t\u{e9}, for=198.51.100.20")
        .send(&app)
        .await
        .assert_429();
    // A proxy that hides the client (`unknown`, `_obfuscated`, no `for=`):
    // keyed by that proxy.
    assert_eq!(fwd("for=unknown").send(&app).await.status, 201);
    assert_eq!(fwd("for=_hidden").send(&app).await.status, 201);
    for hidden in ["proto=https", "for=\"unknown:_p\""] {
        fwd(hidden).send(&app).await.assert_429();
    }
    assert_eq!(fwd("for=_").send(&app).await.status, 400);
}

#[tokio::test]
async fn accounts_behind_a_proxy_setting_x_real_ip() {
    let app = behind("x-real-ip");
    let via = |real: &'static str, xff: &'static str| {
        probe("POST", "/accounts")
            .from("10.1.2.3:5555")
            .header("x-real-ip", real)
            .header("x-forwarded-for", xff)
    };
    assert_eq!(via("198.51.100.7", "1.1.1.1").send(&app).await.status, 201);
    assert_eq!(via("198.51.100.7", "2.2.2.2").send(&app).await.status, 201);
    // A forged X-Forwarded-For changes nothing.
    for forged in ["3.3.3.3", "198.51.100.8", "garbage"] {
        via("198.51.100.7", forged).send(&app).await.assert_429();
    }
    assert_eq!(via("198.51.100.8:443", "").send(&app).await.status, 201);
    assert_eq!(via("nonsense", "").send(&app).await.status, 400);
    // From an untrusted peer, X-Real-IP is the client's own: ignored.
    let direct = |real: &'static str| {
        probe("POST", "/accounts")
            .from("198.51.100.9:1")
            .header("x-real-ip", real)
    };
    assert_eq!(direct("1.1.1.1").send(&app).await.status, 201);
    assert_eq!(direct("2.2.2.2").send(&app).await.status, 201);
    direct("3.3.3.3").send(&app).await.assert_429();
}

#[test]
fn bad_proxy_settings_name_their_variable() {
    let e = limits(vars("10.0.0.0/8", "x real ip")).err().unwrap();
    assert!(
        matches!(
            e,
            DeployError::Env {
                var: "TRUSTED_PROXY_HEADER",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().starts_with("TRUSTED_PROXY_HEADER: "), "{e}");
    assert!(e.to_string().contains("\"x real ip\""), "{e}");
    let e = limits(vars("10.0.0.0/33", "")).err().unwrap();
    assert!(
        matches!(
            e,
            DeployError::Env {
                var: "TRUSTED_PROXIES",
                ..
            }
        ),
        "{e}"
    );
    assert!(limits(vars("", " ")).is_ok());
    assert!(limits(|_| None).is_ok());
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
        let r = login(LOGIN_BAD).send(&app).await;
        assert_eq!(r.status, 401);
        // RFC 9110: every 401 carries a challenge.
        assert_eq!(
            r.header("www-authenticate"),
            Some(axum_example::LOGIN_CHALLENGE)
        );
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

/// The shipped file: a successful login resets the client's failures, and
/// the 6th failure in an hour bans the client IP for an hour, past the
/// point where the sliding log alone would let it in again.
#[tokio::test]
async fn login_success_resets_and_the_sixth_failure_bans_for_an_hour() {
    let (c, clock) = config("");
    let app = app(&c);
    let login = |body| probe("POST", "/login").from("192.0.2.35:1").body(body);
    for _ in 0..4 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    assert_eq!(login(LOGIN_OK).send(&app).await.status, 200);
    // The success forgot the 4: 5 more failures reach the check.
    for _ in 0..5 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    clock.advance(Duration::from_secs(1800));
    let r = login(LOGIN_BAD).send(&app).await;
    r.assert_429();
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 3500, "{retry}");
    let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["banned"], true, "{body}");
    // 61 minutes after the failures the sliding log would admit; the ban,
    // from the 6th attempt on, still holds for the right password too.
    clock.advance(Duration::from_secs(1860));
    let r = login(LOGIN_OK).send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("1740"));
    clock.advance(Duration::from_secs(1740));
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

#[tokio::test]
async fn api_items_unknown_keys_are_401_and_limited_as_anonymous() {
    let (c, clock) = config("");
    let app = app(&c);
    let guess = |key: String| {
        probe("GET", "/api/items")
            .from("192.0.2.70:1")
            .header("x-api-key", key)
    };
    // Made-up keys get no bucket of their own: each is a 401 with a
    // challenge, counted against the client IP's anonymous limit.
    for i in 0..10 {
        let r = guess(format!("made-up-{i}")).send(&app).await;
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some(axum_example::API_KEY_CHALLENGE)
        );
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert!(r
            .header("ratelimit-policy")
            .unwrap()
            .contains("\"anonymous\""));
    }
    // The 11th guess of the minute, and the IP's anonymous requests: 429.
    guess("made-up-10".into()).send(&app).await.assert_429();
    probe("GET", "/api/items")
        .from("192.0.2.70:1")
        .send(&app)
        .await
        .assert_429();
    // A listed key from the same IP keeps its own bucket.
    let r = guess("key-2".into()).send(&app).await;
    assert_eq!(r.status, 200);
    assert!(r.header("ratelimit-policy").unwrap().contains("q=500"));
    // Another IP guessing: its own 10 per minute.
    let r = probe("GET", "/api/items")
        .from("192.0.2.71:1")
        .header("x-api-key", "made-up-0")
        .send(&app)
        .await;
    assert_eq!(r.status, 401);
    clock.advance(Duration::from_secs(6));
    assert_eq!(guess("made-up-11".into()).send(&app).await.status, 401);
    // With no keys configured (the default), every key is unknown.
    let app = self::app(&Setup::default());
    let r = probe("GET", "/api/items")
        .header("x-api-key", "key-1")
        .send(&app)
        .await;
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").is_some());
}

/// 12 requests with made-up keys against 10 per minute: no more than 10
/// reach the handler, whatever the keys.
#[tokio::test]
async fn api_items_made_up_keys_do_not_skip_the_anonymous_limit() {
    let (c, _) = config("");
    let app = app(&c);
    let mut codes = Vec::new();
    for i in 0..12 {
        let r = probe("GET", "/api/items")
            .header("x-api-key", format!("attacker-{i}"))
            .send(&app)
            .await;
        codes.push(r.status);
    }
    assert_eq!(codes[..10], [401; 10]);
    assert_eq!(codes[10..], [429; 2]);
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
    let limits = limits(|v| (v == "BIND_ADDR").then(|| "127.0.0.1:0".to_owned())).unwrap();
    let server = limits
        .bind(app_on(&limits, &Config::default()).unwrap())
        .await;
    let server = server.unwrap();
    let addr = server.local_addr();
    let server = tokio::spawn(server.run(std::future::pending()));
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
            ..Limits::default()
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
            ..Limits::default()
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
            ..Limits::default()
        })
        .unwrap();
        let server = tokio::spawn(::hyper_example::run(
            listener,
            svc,
            ::tower_ratelimit::serve::ServeOptions::default(),
            std::future::pending(),
        ));
        assert_eq!(http(addr, "GET", "/", "").await.0, 200);
        assert_eq!(http(addr, "GET", "/", "").await.0, 200);
        let (status, text) = http(addr, "GET", "/", "").await;
        assert_eq!(status, 429);
        assert!(text.contains("application/problem+json"));
        server.abort();
    }
}

mod admin;
mod fleet_on_redis;
mod grpc;
mod hardening;
mod on_redis;
mod policy_on_redis;
mod prefixes;

/// HEAD is served by the GET handler, so it counts against the GET limit:
/// a guessing client learns nothing once its anonymous quota is gone.
#[tokio::test]
async fn head_is_limited_like_get() {
    let (config, _clock) = config("");
    let app = app(&config);
    for _ in 0..10 {
        assert_eq!(probe("HEAD", "/api/items").send(&app).await.status, 200);
    }
    let guess = probe("HEAD", "/api/items").header("x-api-key", "guess-1");
    assert_eq!(guess.send(&app).await.status, 429);
    probe("GET", "/api/items").send(&app).await.assert_429();
}

/// A policy file that leaves a route out leaves it unlimited, not broken.
#[tokio::test]
async fn a_route_the_policy_leaves_out_is_served() {
    let (setup, _clock) = config("");
    let limits = Limits::from_toml("", None, |_| None).unwrap();
    let app = app_on(&limits, &setup.config).unwrap();
    for _ in 0..3 {
        let reply = probe("POST", "/accounts").send(&app).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        let reply = probe("POST", "/tickets")
            .header("authorization", "Bearer alice")
            .send(&app)
            .await;
        assert_eq!(reply.status, 201, "{reply:?}");
    }
}
