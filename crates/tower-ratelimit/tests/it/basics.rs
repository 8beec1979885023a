//! The layer in axum (`layer`, `route_layer`, `MockConnectInfo`) and in `ServiceBuilder`.

use crate::common::*;
use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::extract::Extension;
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use ratelimit_core::{Gcra, ManualClock, MemoryStore};
use std::convert::Infallible;
use std::net::SocketAddr;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_ratelimit::key::{Global, PeerIp};
use tower_ratelimit::response::{Headers, RATELIMIT, RATELIMIT_POLICY};
use tower_ratelimit::{RateLimit, RateLimitInfo, RateLimitLayer};

fn assert_clone_send_sync<T: Clone + Send + Sync>() {}

#[test]
fn layer_and_service_are_clone_send_sync() {
    type L = RateLimitLayer<PeerIp, MemoryStore<Gcra, tower_ratelimit::key::IpKey>>;
    assert_clone_send_sync::<L>();
    assert_clone_send_sync::<
        RateLimit<Router, PeerIp, MemoryStore<Gcra, tower_ratelimit::key::IpKey>>,
    >();
}

#[tokio::test]
async fn oneshot_with_mock_connect_info() {
    let store = MemoryStore::new(Gcra::new(2, 60 * SEC).unwrap());
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(RateLimitLayer::new(store, PeerIp::new()))
        .layer(MockConnectInfo(SocketAddr::from(([203, 0, 113, 1], 4000))));
    for expected in [200, 200, 429] {
        let res = app
            .clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), expected);
    }
    let res = app
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.headers()["retry-after"], "30");
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
    assert_eq!(body["status"], 429);
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["retry_after"], 30);
    assert_eq!(body["type"], "about:blank");
    assert!(body["detail"].as_str().unwrap().contains("30 seconds"));
}

#[tokio::test]
async fn route_layer_limits_only_its_route_and_keeps_404_405() {
    let store = MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap());
    let app = Router::new()
        .route(
            "/limited",
            post(|| async { "posted" }).route_layer(RateLimitLayer::new(store, PeerIp::new())),
        )
        .route("/free", get(|| async { "free" }));
    let peer = "192.0.2.1:1";
    let call = |method: &str, uri: &str| {
        let mut req = get_from(peer, uri, &[]);
        *req.method_mut() = method.parse().unwrap();
        app.clone().oneshot(req)
    };
    assert_eq!(call("POST", "/limited").await.unwrap().status(), 200);
    assert_eq!(call("POST", "/limited").await.unwrap().status(), 429);
    assert_eq!(call("GET", "/limited").await.unwrap().status(), 405);
    for _ in 0..5 {
        assert_eq!(call("GET", "/free").await.unwrap().status(), 200);
    }
    assert_eq!(call("GET", "/nope").await.unwrap().status(), 404);
}

#[tokio::test]
async fn handlers_read_the_decision() {
    let store = MemoryStore::new(Gcra::new(5, 60 * SEC).unwrap());
    let app = Router::new()
        .route(
            "/",
            get(|Extension(info): Extension<RateLimitInfo>| async move {
                format!("{}", info.remaining().unwrap())
            }),
        )
        .layer(RateLimitLayer::new(store, PeerIp::new()));
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    assert_eq!(res.headers()[RATELIMIT_POLICY], "\"default\";q=5;w=60");
    assert_eq!(res.headers()[RATELIMIT], "\"default\";r=4;t=12");
    assert_eq!(body_string(res).await, "4");
}

#[tokio::test]
async fn service_builder_with_plain_service_and_no_headers() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(Global)
        .limit("g", MemoryStore::new(Gcra::new(1, SEC).unwrap()))
        .headers(Headers::none())
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(layer)
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(http::Response::new(axum::body::Body::from("ok")))
        });
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get(RATELIMIT).is_none());
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "1");
    assert!(res.headers().get(RATELIMIT).is_none());
    clock.advance(SEC);
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn clones_share_the_limit() {
    let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(3, 60 * SEC).unwrap()), Global);
    let a = Router::new()
        .route("/", get(|| async { "a" }))
        .layer(layer.clone());
    let b = Router::new().route("/", get(|| async { "b" })).layer(layer);
    let mut ok = 0;
    for i in 0..10 {
        let app = if i % 2 == 0 { a.clone() } else { b.clone() };
        let res = app.oneshot(get_from("10.0.0.1:1", "/", &[])).await.unwrap();
        ok += usize::from(res.status() == 200);
    }
    assert_eq!(ok, 3);
}

/// An app served without connection info: every request gets a 400 naming
/// the fix, and the log says it once, at `error`.
#[tokio::test]
async fn missing_connect_info_is_a_4xx_naming_the_fix_logged_once() {
    let (out, _guard) = capture_warnings();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(RateLimitLayer::new(
            MemoryStore::new(Gcra::new(1, SEC).unwrap()),
            PeerIp::new(),
        ));
    for _ in 0..50 {
        let res = app
            .clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        let body: serde_json::Value = serde_json::from_str(&body_string(res).await).unwrap();
        assert_eq!(
            body["detail"],
            "Missing ConnectInfo<SocketAddr>: serve the app with \
             into_make_service_with_connect_info::<SocketAddr>()."
        );
    }
    let log = out.text();
    assert_eq!(log.matches(" ERROR ").count(), 1, "{log}");
    assert_eq!(
        log.matches("into_make_service_with_connect_info::<SocketAddr>()")
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains("layer=\"default\""), "{log}");
}

/// The same behind a trusted proxy ([`ClientIp`] needs the peer too), and
/// with a policy that lets such requests through: still logged once.
#[tokio::test]
async fn missing_connect_info_is_logged_once_whatever_the_policy() {
    use tower_ratelimit::key::ClientIp;
    use tower_ratelimit::strategy::KeyErrorPolicy;
    let (out, _guard) = capture_warnings();
    let layer = RateLimitLayer::builder(ClientIp::new(["10.0.0.0/8"]).unwrap())
        .limit("proxied", MemoryStore::new(Gcra::new(1, SEC).unwrap()))
        .on_key_error(KeyErrorPolicy::Allow)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(layer);
    for _ in 0..20 {
        let res = app
            .clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    let log = out.text();
    assert_eq!(log.matches(" ERROR ").count(), 1, "{log}");
    assert!(log.contains("layer=\"proxied\""), "{log}");
}

#[test]
fn invalid_configuration_is_an_error() {
    use tower_ratelimit::key::{ClientIp, Header, IpPrefixes};
    use tower_ratelimit::LayerBuildError;
    assert!(matches!(
        ClientIp::new(["10.0.0.0/99"]),
        Err(LayerBuildError::BadCidr(_))
    ));
    assert!(matches!(
        PeerIp::new().ipv6_prefix(0),
        Err(LayerBuildError::BadPrefix { .. })
    ));
    assert!(matches!(
        PeerIp::new().ipv6_prefix(129),
        Err(LayerBuildError::BadPrefix { .. })
    ));
    assert!(IpPrefixes::new(32, 48).is_ok());
    assert!("".parse::<Header>().is_err());
    let store =
        || MemoryStore::<Gcra, tower_ratelimit::key::GlobalKey>::new(Gcra::new(1, SEC).unwrap());
    let no_limits =
        RateLimitLayer::<Global, MemoryStore<Gcra, tower_ratelimit::key::GlobalKey>>::builder(
            Global,
        )
        .build();
    assert_eq!(no_limits.unwrap_err(), LayerBuildError::NoLimits);
    let dup = RateLimitLayer::builder(Global)
        .limit("a", store())
        .limit("a", store())
        .build();
    assert!(matches!(dup, Err(LayerBuildError::DuplicateLimitName(_))));
    let bad = RateLimitLayer::builder(Global).limit("é", store()).build();
    assert!(matches!(bad, Err(LayerBuildError::BadLimitName(_))));
    let mut b = RateLimitLayer::builder(Global);
    for i in 0..65 {
        b = b.limit(format!("l{i}"), store());
    }
    assert!(matches!(b.build(), Err(LayerBuildError::TooManyLimits(65))));
}

#[tokio::test]
async fn stacked_layers_share_info_and_append_headers() {
    let global = RateLimitLayer::builder(Global)
        .limit(
            "global",
            MemoryStore::new(Gcra::new(100, 60 * SEC).unwrap()),
        )
        .build()
        .unwrap();
    let per_ip = RateLimitLayer::builder(PeerIp::new())
        .limit("per-ip", MemoryStore::new(Gcra::new(10, 60 * SEC).unwrap()))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/",
            get(|Extension(info): Extension<RateLimitInfo>| async move {
                let names: Vec<&str> = info.decisions().iter().map(|d| d.name).collect();
                names.join(",")
            }),
        )
        .layer(global)
        .layer(per_ip);
    let res = app.oneshot(get_from("10.0.0.1:1", "/", &[])).await.unwrap();
    let lines: Vec<_> = res.headers().get_all(RATELIMIT).iter().collect();
    assert_eq!(lines, ["\"global\";r=99;t=1", "\"per-ip\";r=9;t=6"]);
    assert_eq!(body_string(res).await, "per-ip,global");
}

#[tokio::test]
async fn user_id_from_auth_middleware() {
    use tower_ratelimit::key::FromExtension;
    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct UserId(String);
    impl std::fmt::Display for UserId {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl ratelimit_core::algorithm::StableKey for UserId {
        fn write_stable(&self, h: &mut ratelimit_core::algorithm::StableHasher) {
            self.0.write_stable(h);
        }
    }
    let limit = RateLimitLayer::new(
        MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()),
        FromExtension::<UserId>::new(),
    );
    // "Authentication": the user id comes from a header, outside the limit.
    let auth = tower::util::MapRequestLayer::new(|mut req: Request<Body>| {
        if let Some(user) = req.headers().get("x-user").and_then(|v| v.to_str().ok()) {
            let user = UserId(user.to_owned());
            req.extensions_mut().insert(user);
        }
        req
    });
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(limit)
        .layer(auth);
    let send = |user: Option<&'static str>| {
        let headers: Vec<(&str, &[u8])> =
            user.map(|u| ("x-user", u.as_bytes())).into_iter().collect();
        app.clone().oneshot(get_from("10.0.0.1:1", "/", &headers))
    };
    assert_eq!(send(Some("ann")).await.unwrap().status(), 200);
    assert_eq!(send(Some("ann")).await.unwrap().status(), 429);
    assert_eq!(send(Some("bob")).await.unwrap().status(), 200);
    assert_eq!(send(None).await.unwrap().status(), 401);
}

#[tokio::test]
async fn composite_route_and_client() {
    use tower_ratelimit::key::{Composite, Route};
    let layer = RateLimitLayer::new(
        MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()),
        Composite::new(Route, PeerIp::new()),
    );
    let app = Router::new()
        .route("/a/{id}", get(|| async { "a" }))
        .route("/b", get(|| async { "b" }))
        .layer(layer);
    let send = |uri: &'static str| app.clone().oneshot(get_from("10.0.0.1:1", uri, &[]));
    assert_eq!(send("/a/1").await.unwrap().status(), 200);
    // Same route pattern, other id: same key.
    assert_eq!(send("/a/2").await.unwrap().status(), 429);
    assert_eq!(send("/b").await.unwrap().status(), 200);
}

#[tokio::test]
async fn around_the_router_checks_before_routing() {
    use tower_layer::Layer;
    let store = MemoryStore::new(Gcra::new(3, 60 * SEC).unwrap());
    let router = Router::new().route(
        "/",
        get(|Extension(info): Extension<RateLimitInfo>| async move {
            info.remaining().unwrap().to_string()
        }),
    );
    let app = RateLimitLayer::new(store, PeerIp::new()).layer(router);
    let mut statuses = Vec::new();
    for (peer, uri) in [
        ("203.0.113.1:1", "/"),
        ("203.0.113.1:2", "/missing"),
        ("203.0.113.1:3", "/"),
        ("203.0.113.1:4", "/"),
        ("203.0.113.1:5", "/missing"),
        ("203.0.113.2:1", "/"),
    ] {
        let res = app.clone().oneshot(get_from(peer, uri, &[])).await.unwrap();
        let status = res.status().as_u16();
        let remaining = res.headers().get(RATELIMIT).cloned();
        let body = body_string(res).await;
        statuses.push(status);
        if uri == "/" && status == 200 {
            // The handler sees the same decision as the header.
            let header = remaining.unwrap();
            assert!(header.to_str().unwrap().contains(&format!(";r={body};")));
        }
    }
    // A 404 counts like any request: the check comes before routing.
    assert_eq!(statuses, [200, 404, 200, 429, 429, 200]);
}

/// Limiting shows at `info` without a line per request: the first refusal
/// of a limit logs a line, and then at most one a minute, each with the
/// count of refusals since the one before.
#[tokio::test(flavor = "current_thread")]
async fn refusals_are_summed_up_once_a_minute_at_info() {
    let (out, _guard) = capture(tracing::Level::INFO);
    let clock = ManualClock::new();
    let layer = tower_ratelimit::RateLimitLayer::builder(tower_ratelimit::key::Global)
        .limit("tiny", MemoryStore::new(Gcra::new(1, 3600 * SEC).unwrap()))
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(layer);
    let send = || async {
        app.clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    };
    assert_eq!(send().await, 200);
    // 1 refusal: its line at once. Then 200 within the minute: no line.
    for _ in 0..201 {
        assert_eq!(send().await, 429);
        clock.advance(std::time::Duration::from_millis(100));
    }
    let lines = |log: &str| -> Vec<u64> {
        log.lines()
            .filter(|l| l.contains("since its last summary"))
            .map(|l| {
                assert!(l.contains(" INFO ") && l.contains("limit=tiny"), "{l}");
                let n = l.split("limited=").nth(1).unwrap();
                n.split_whitespace().next().unwrap().parse().unwrap()
            })
            .collect()
    };
    assert_eq!(lines(&out.text()), vec![1]);
    // A minute after the first line, the next refusal logs the other 200
    // and itself.
    clock.advance(std::time::Duration::from_secs(60));
    assert_eq!(send().await, 429);
    assert_eq!(lines(&out.text()), vec![1, 201]);
}

/// A store at its cap says so: the upkeep logs evictions at `info`, and
/// new keys refused from what evicted keys had used at `warn`, at most
/// once a minute each.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn evictions_and_refused_new_keys_are_logged() {
    let (out, _guard) = capture(tracing::Level::INFO);
    let clock = ManualClock::new();
    let store = MemoryStore::builder(Gcra::new(1, 3600 * SEC).unwrap())
        .shards(1)
        .max_keys(Some(1))
        .build()
        .unwrap();
    let key = tower_ratelimit::key::Header::new(http::HeaderName::from_static("x-user"));
    let layer = RateLimitLayer::builder(key)
        .limit("capped", store)
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(layer);
    let send = |user: &'static str| {
        let app = app.clone();
        async move {
            let req = Request::get("/").header("x-user", user);
            let res = app.oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
            res.status()
        }
    };
    assert_eq!(send("alice").await, 200);
    // Bob evicts alice; alice comes back used up (refused, counted).
    assert_eq!(send("bob").await, 200);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        out.text().contains("keys evicted at the store's cap"),
        "{}",
        out.text()
    );
    assert_eq!(send("alice").await, 429);
    clock.advance(std::time::Duration::from_secs(61));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let log = out.text();
    let warning = log
        .lines()
        .find(|l| l.contains("new keys refused at their first request"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        warning.contains(" WARN ") && warning.contains("limit=capped"),
        "{warning}"
    );
    assert!(warning.contains("refused=1"), "{warning}");
    assert!(!log.contains("alice"), "keys are never logged: {log}");
}
