//! `deploy::Limits`: two instances from one file on one redis-server share
//! their limits and bans; the environment overrides the file; the admin
//! API, the metrics and readiness.

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{Request, StatusCode};
use ratelimit_redis::StoreSettings;
use ratelimit_test_support::redis_server::{skip_loudly, RedisServer};
use tower::ServiceExt;
use tower_ratelimit::deploy::{DeployError, Limits};

const TOKEN: &str = "0123456789abcdef-admin";

/// The file: a 20-a-minute limit on a header key, banned for an hour, on
/// a store that waits 2 s for an answer (on a busy machine a slower
/// answer than the default 50 ms is not an outage: counts stay exact).
fn file(url: &str) -> String {
    format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"deploy-test:\"\ntimeout = \"2s\"\n\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\n\
         [[limit]]\nname = \"api\"\nalgorithm = \"fixed-window 20/1m\"\nkey = \"header:x-key\"\n\
         routes = [\"GET /\"]\nban = \"1h\"\nban-any-key = true\n\n\
         [[limit]]\nname = \"ip\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [\"GET /other\"]\n"
    )
}

/// The error loading `text` as the file `ratelimit.toml`, with no
/// environment.
fn file_error(text: &str) -> String {
    Limits::from_toml(text, Some("ratelimit.toml".as_ref()), |_| None)
        .unwrap_err()
        .to_string()
}

fn env(var: &str) -> Option<String> {
    (var == "ADMIN_TOKEN").then(|| TOKEN.to_owned())
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/other", get(|| async { "ok" }))
}

async fn get_key(app: &Router, key: &str) -> (StatusCode, u64) {
    let req = Request::get("/")
        .header("x-key", key)
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let retry = res
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(0);
    (res.status(), retry)
}

async fn admin(router: &Router, method: &str, path: &str, token: &str, body: &str) -> StatusCode {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(body.to_owned()))
        .unwrap();
    router.clone().oneshot(req).await.unwrap().status()
}

fn redis() -> Option<RedisServer> {
    let server = RedisServer::start();
    if server.is_none() {
        skip_loudly("no redis-server: deploy tests on Redis skipped");
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_limits_bans_and_admin() {
    let Some(mut server) = redis() else { return };
    let text = file(&server.url());
    let (a, b) = (
        Limits::from_toml(&text, None, env).unwrap(),
        Limits::from_toml(&text, None, env).unwrap(),
    );
    let (app_a, app_b) = (a.apply(app()).unwrap(), b.apply(app()).unwrap());
    assert!(a.ready().await && b.ready().await);
    let key = "k".repeat(100);
    let mut admitted = 0;
    for i in 0..40 {
        let app = if i % 2 == 0 { &app_a } else { &app_b };
        admitted += usize::from(get_key(app, &key).await.0 == StatusCode::OK);
    }
    assert_eq!(admitted, 20, "two instances share one limit exactly");
    let (status, retry) = get_key(&app_b, &key).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        retry > 3000,
        "the ban (1h) holds, not the window: Retry-After {retry}"
    );

    let (admin_a, admin_b) = (a.admin_router().unwrap(), b.admin_router().unwrap());
    let path = format!("/limits/api/bans/{key}");
    assert_eq!(
        admin(&admin_a, "DELETE", &path, TOKEN, "").await,
        StatusCode::OK
    );
    assert_eq!(
        get_key(&app_b, &key).await.0,
        StatusCode::OK,
        "unbanned and reset on both"
    );
    let other = "o".repeat(100);
    let path = format!("/limits/api/bans/{other}");
    assert_eq!(
        admin(&admin_b, "PUT", &path, TOKEN, r#"{"for": "1h"}"#).await,
        StatusCode::OK
    );
    assert_eq!(
        get_key(&app_a, &other).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "banned on both"
    );
    let network = "/limits/ip/keys/198.51.100.0%2F24";
    assert_eq!(
        admin(&admin_a, "GET", network, TOKEN, "").await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        admin(&admin_a, "PUT", &path, TOKEN, "{").await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        admin(&admin_a, "GET", "/limits/none/keys/x", TOKEN, "").await,
        StatusCode::NOT_FOUND
    );
    for _ in 0..10 {
        assert_eq!(
            admin(&admin_a, "GET", "/limits", "wrong-token", "").await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        admin(&admin_a, "GET", "/limits", "wrong-token", "").await,
        StatusCode::TOO_MANY_REQUESTS
    );

    server.kill();
    assert!(
        !a.ready().await,
        "ready turns false when redis-server stops"
    );
}

#[test]
fn the_environment_overrides_the_file_and_bad_values_are_named() {
    let memory = "[store]\nkind = \"memory\"\n[[limit]]\nname = \"a\"\nalgorithm = \"gcra 5/1m\"\nkey = \"peer-ip\"\n";
    let redis = |var: &str| (var == "REDIS_URL").then(|| "redis://127.0.0.1:1/".to_owned());
    let limits = Limits::from_toml(memory, None, redis).unwrap();
    assert!(
        matches!(limits.store(), StoreSettings::Redis { url, .. } if url == "redis://127.0.0.1:1/")
    );
    for (var, value) in [
        ("RATELIMIT_MAX_KEYS", "0"),
        ("TRUSTED_PROXIES", "not-a-network"),
        ("REDIS_URL", "http://x/"),
        ("RATELIMIT_LEASE", "many"),
        ("METRICS_ADDR", "nowhere"),
        ("ADMIN_ADDR", "nowhere"),
        ("BIND_ADDR", "nowhere"),
        ("MAX_CONNECTIONS", "0"),
        ("MAX_CONNECTIONS_PER_CLIENT", "lots"),
    ] {
        let err = Limits::from_toml(memory, None, |v: &str| (v == var).then(|| value.to_owned()))
            .unwrap_err();
        assert!(
            matches!(err, DeployError::Env { var: named, .. } if named == var),
            "{var}: {err}"
        );
    }
    let cluster =
        "[store]\nkind = \"redis\"\nurl = [\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"]\n";
    let limits = Limits::from_toml(cluster, None, |_| None).unwrap();
    assert!(
        matches!(limits.store(), StoreSettings::Redis { url, .. } if url == "redis://10.0.0.1:7000,redis://10.0.0.2:7000")
    );
    // REDIS_URL over a memory store: its cap is the fallback's.
    let capped_memory = "[store]\nkind = \"memory\"\nmax-keys = 500\n";
    let limits = Limits::from_toml(capped_memory, None, redis).unwrap();
    assert!(
        matches!(
            limits.store(),
            StoreSettings::Redis {
                fallback_max_keys: Some(500),
                ..
            }
        ),
        "{:?}",
        limits.store()
    );
    let capped = format!("{memory}[server]\nmax-connections = 0\n");
    let err = file_error(&capped);
    assert!(
        err.contains("[server] max-connections: \"0\": out of range"),
        "{err}"
    );
    let with_admin = format!("{memory}[admin]\naddress = \"127.0.0.1:0\"\n");
    let err = Limits::from_toml(&with_admin, None, |_| None).unwrap_err();
    assert!(
        matches!(
            err,
            DeployError::Env {
                var: "ADMIN_TOKEN",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_token_in_the_file_and_unknown_fields_are_refused() {
    let text = "[admin]\naddress = \"127.0.0.1:0\"\ntoken = \"0123456789abcdef0123\"\n";
    let err = file_error(text);
    assert!(err.starts_with("ratelimit.toml:3: [admin] token"), "{err}");
    assert!(!err.contains("0123456789abcdef0123"), "{err}");
    let err = Limits::from_toml("[store]\nkind = \"memory\"\nmax_keys = 5\n", None, |_| None)
        .unwrap_err();
    assert!(
        err.to_string().contains("[store] unknown field `max_keys`"),
        "{err}"
    );
}

#[tokio::test]
async fn metrics_router_scrapes_the_layer_counters() {
    let text = "[metrics]\naddress = \"127.0.0.1:0\"\n[[limit]]\nname = \"scraped\"\nalgorithm = \"gcra 1/1m\"\nkey = \"global\"\n";
    let limits = Limits::from_toml(text, None, |_| None).unwrap();
    let app = limits.apply(app()).unwrap();
    let metrics = limits.metrics_router().expect("metrics on");
    for _ in 0..2 {
        app.clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
    }
    let res = metrics
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("ratelimit_limited_total{limit=\"scraped\"} 1"),
        "{body}"
    );
    assert!(Limits::from_toml("", None, |_| None)
        .unwrap()
        .metrics_router()
        .is_none());
}

#[test]
fn the_policy_tables_errors_keep_the_files_lines() {
    let text = "[store]\nkind = \"memory\"\n\n[[limit]]\nname = \"api\"\nalgorithm = \"gcra 5/1m\"\nkey = \"baerer\"\n";
    let err = file_error(text);
    assert!(err.starts_with("ratelimit.toml:7: limit \"api\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_file_reloads_its_limits() {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let path = std::env::temp_dir().join(format!(
        "deploy-reload-{}-{unique}.toml",
        std::process::id()
    ));
    let file = |rate: &str| {
        format!("[store]\nkind = \"memory\"\n[[limit]]\nname = \"api\"\nalgorithm = \"gcra {rate}\"\nkey = \"global\"\n")
    };
    std::fs::write(&path, file("5/1m")).unwrap();
    let limits = Limits::from_toml(&file("5/1m"), Some(&path), |_| None).unwrap();
    let _app = limits.apply(app()).unwrap();
    std::fs::write(&path, file("7/1m")).unwrap();
    let handle = limits.handle().unwrap();
    let mut waited = 0;
    while handle.limit("api").unwrap().get().to_string() != "gcra 7/1m" {
        assert!(waited < 200, "not reloaded within 20 s");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        waited += 1;
    }
    let _ = std::fs::remove_file(&path);
}

/// The environment of a deployment served on free ports, its admin API
/// on.
fn served(var: &str) -> Option<String> {
    match var {
        "BIND_ADDR" | "ADMIN_ADDR" => Some("127.0.0.1:0".to_owned()),
        _ => env(var),
    }
}

/// `GET /other` over HTTP/1.1 on a new connection to `addr`: the status.
async fn h1_get(addr: std::net::SocketAddr) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// `Limits::serve`'s listener answers HTTP/1.1 and h2c (prior knowledge)
/// on one port, each request keyed by its peer (`client-ip`, 5 a
/// minute): two over HTTP/1.1 and three HTTP/2 streams are admitted, the
/// next stream is not. The shutdown ends the run.
#[tokio::test]
async fn serve_answers_http1_and_h2c_on_one_port() {
    let text = "[[limit]]\nname = \"ip\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [\"GET /other\"]\n";
    let limits = Limits::from_toml(text, None, served).unwrap();
    let server = limits.bind(limits.apply(app()).unwrap()).await.unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    assert_eq!((h1_get(addr).await, h1_get(addr).await), (200, 200));
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let exec = hyper_util::rt::TokioExecutor::new();
    let (mut send, conn) = hyper::client::conn::http2::handshake(exec, io)
        .await
        .expect("an HTTP/2 handshake");
    tokio::spawn(conn);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let req = Request::get("http://x/other")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let res = send.send_request(req).await.expect("an answer");
        assert_eq!(res.version(), http::Version::HTTP_2);
        statuses.push(res.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    stop.send(()).unwrap();
    drop(send);
    tokio::time::timeout(std::time::Duration::from_secs(20), running)
        .await
        .expect("stopped after the shutdown")
        .unwrap();
}

/// The admin listener of `Limits::serve` is hardened as the app's: a
/// connection that sends nothing is closed after 10 s (of tokio's
/// paused clock), and past its 64 connections the one idle longest makes
/// room for a request, answered at once (within 5 s of the real clock).
#[tokio::test(start_paused = true)]
async fn the_admin_listener_closes_idle_connections_and_caps_them() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::{Duration, Instant};
    let limits = Limits::from_toml("", None, served).unwrap();
    let server = limits.bind(limits.apply(app()).unwrap()).await.unwrap();
    let admin = server.admin_local_addr().expect("the admin API is on");
    tokio::spawn(server.run(std::future::pending()));
    let start = Instant::now();
    let mut silent = tokio::net::TcpStream::connect(admin).await.unwrap();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(30), silent.read(&mut buf)).await;
    assert!(read.is_ok(), "still open after 30 s");
    assert!(
        start.elapsed() >= Duration::from_secs(10),
        "closed after {:?}",
        start.elapsed()
    );
    // On the real clock from here: a paused one would jump to the next
    // 10 s timeout whenever the kernel had not yet handed a loopback
    // packet over, and close the held connections as idle.
    tokio::time::resume();
    let mut held = Vec::new();
    for _ in 0..tower_ratelimit::deploy::SIDE_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(admin).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    let mut late = tokio::net::TcpStream::connect(admin).await.unwrap();
    let request =
        format!("GET /limits HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    late.write_all(request.as_bytes()).await.unwrap();
    let n = late.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "served after {:?}",
        start.elapsed()
    );
}

/// Two instances with plans: pro from `PRO_KEYS`, `office` moved in at run
/// time only.
fn plans_file(url: &str) -> String {
    format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"deploy-plans:\"\ntimeout = \"2s\"\n\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\n\
         [[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-env = \"PRO_KEYS\"\n\n\
         [[plan]]\nname = \"office\"\nkey = \"client-ip\"\nshared = true\n\n\
         [[limit]]\nname = \"pro-requests\"\nplan = \"pro\"\nalgorithm = \"fixed-window 5/1m\"\n\
         key = \"api-key\"\nroutes = [\"GET /\"]\n\n\
         [[limit]]\nname = \"free-requests\"\nplan = \"none\"\nalgorithm = \"fixed-window 2/1m\"\n\
         key = \"api-key\"\nroutes = [\"GET /\"]\n"
    )
}

/// A 100-byte API key.
fn api_key(c: char) -> String {
    c.to_string().repeat(100)
}

fn plans_env(var: &str) -> Option<String> {
    match var {
        "PRO_KEYS" => Some(api_key('p')),
        other => env(other),
    }
}

/// `n` requests with `key`, alternating between `apps`; how many passed.
async fn admitted(apps: [&Router; 2], key: &str, n: usize) -> usize {
    let mut admitted = 0;
    for i in 0..n {
        let req = Request::get("/")
            .header("x-api-key", key)
            .body(Body::empty())
            .unwrap();
        let res = apps[i % 2].clone().oneshot(req).await.unwrap();
        admitted += usize::from(res.status() == StatusCode::OK);
    }
    admitted
}

/// Waits (up to 20 s) until `limits` counts `moved` keys moved into `plan`.
async fn until_moved(limits: &Limits, plan: &str, moved: usize) {
    let handle = limits.handle().unwrap();
    for _ in 0..200 {
        if handle
            .plans()
            .members()
            .iter()
            .any(|p| p.name == plan && p.moved_in == moved)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!(
        "plan {plan} never had {moved} keys moved in: {:?}",
        handle.plans().members()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_moved_into_a_plan_on_one_instance_gets_its_limits_on_both() {
    let Some(server) = redis() else { return };
    let text = plans_file(&server.url());
    let (a, b) = (
        Limits::from_toml(&text, None, plans_env).unwrap(),
        Limits::from_toml(&text, None, plans_env).unwrap(),
    );
    let (app_a, app_b) = (a.apply(app()).unwrap(), b.apply(app()).unwrap());
    assert!(a.ready().await && b.ready().await);
    let both = [&app_a, &app_b];
    assert_eq!(
        admitted(both, &api_key('p'), 8).await,
        5,
        "pro from the environment"
    );
    let free = api_key('f');
    assert_eq!(admitted(both, &free, 4).await, 2, "in no plan");

    let (admin_a, admin_b) = (a.admin_router().unwrap(), b.admin_router().unwrap());
    let path = format!("/plans/pro/keys/{free}");
    assert_eq!(
        admin(&admin_a, "PUT", &path, TOKEN, "").await,
        StatusCode::OK
    );
    until_moved(&b, "pro", 1).await;
    assert_eq!(
        admitted([&app_b, &app_b], &free, 8).await,
        5,
        "pro's limits on B, from pro's own count"
    );
    let req = Request::get("/plans")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let res = admin_b.clone().oneshot(req).await.unwrap();
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains(r#""listed":1,"moved_in":1,"name":"pro""#),
        "{body}"
    );
    assert!(
        !body.contains("ffff") && !body.contains("pppp"),
        "no key shown: {body}"
    );

    for (method, path, status) in [
        ("PUT", "/plans/gold/keys/k", StatusCode::NOT_FOUND),
        (
            "PUT",
            "/plans/office/keys/not-an-address",
            StatusCode::BAD_REQUEST,
        ),
        (
            "DELETE",
            "/plans/office/keys/192.0.2.7",
            StatusCode::NOT_FOUND,
        ),
    ] {
        assert_eq!(
            admin(&admin_a, method, path, TOKEN, "").await,
            status,
            "{method} {path}"
        );
    }
    let path = format!("/plans/pro/keys/{free}");
    assert_eq!(
        admin(&admin_b, "DELETE", &path, TOKEN, "").await,
        StatusCode::OK
    );
    until_moved(&a, "pro", 0).await;
    assert_eq!(
        admitted(both, &free, 2).await,
        0,
        "back in no plan, its count used"
    );
}

#[test]
fn a_shared_plan_needs_the_store_in_redis() {
    let text = "[[plan]]\nname = \"partner\"\nkey = \"api-key\"\nshared = true\n";
    let err = file_error(text);
    assert!(
        err.contains("plan \"partner\": shared = true needs the store in Redis"),
        "{err}"
    );
}
