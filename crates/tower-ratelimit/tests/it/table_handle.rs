//! `PolicyHandle::get`: a handle on every limit a table built, on the
//! store its layer uses: reset, ban, unban, peek, check and refund a key
//! written as text, the layer seeing each at once; and a builder layer's
//! `store(name)`.

use crate::common::get_from;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use axum::Router;
use ratelimit_core::{ManualClock, MemoryStore, SlidingLog, Store};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{IpPrefixes, PeerIp};
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
use tower_ratelimit::RateLimitLayer;

const TABLE: &str = r#"
[[limit]]
name = "login"
algorithm = "sliding-log 2/1h"
key = "peer-ip"
routes = ["POST /login"]

[[limit]]
name = "network"
algorithm = "sliding-log 100/1h"
key = "peer-ip(v4/24, v6/48)"
routes = ["POST /login"]
"#;

async fn login(app: &Router, peer: &str) -> StatusCode {
    let mut req = get_from(peer, "/login", &[]);
    *req.method_mut() = Method::POST;
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn every_limit_has_a_handle_on_its_layers_store() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let clock = ManualClock::new();
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let router = Router::new().route("/login", post(|| async { "ok" }));
    let (app, limits) = table.apply_in_memory(router, &options, None).unwrap();
    let names: Vec<_> = limits.handles().iter().map(|h| h.name()).collect();
    assert_eq!(names, ["login", "network"]);
    assert!(limits.get("nope").is_none());
    let login_limit = limits.get("login").unwrap();
    let peer = "203.0.113.7:1";
    let ip = login_limit.key("203.0.113.7").unwrap();
    assert_eq!(login(&app, peer).await, StatusCode::OK);
    assert_eq!(login_limit.peek(&ip).await.unwrap().remaining, 1);
    assert_eq!(login(&app, peer).await, StatusCode::OK);
    assert_eq!(login(&app, peer).await, StatusCode::TOO_MANY_REQUESTS);
    // A reset: the layer admits at once.
    login_limit.reset(&ip).await.unwrap();
    assert_eq!(login_limit.peek(&ip).await.unwrap().remaining, 2);
    assert_eq!(login(&app, peer).await, StatusCode::OK);
    // A ban by code, then lifted.
    login_limit
        .ban(&ip, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(login(&app, peer).await, StatusCode::TOO_MANY_REQUESTS);
    login_limit.unban(&ip).await.unwrap();
    assert_eq!(login(&app, peer).await, StatusCode::OK);
    // The network's key: a /24 written as a network or an address in it.
    let network = limits.get("network").unwrap();
    let net = network.key("203.0.113.0/24").unwrap();
    assert_eq!(net, network.key("203.0.113.99").unwrap());
    assert_eq!(net.to_string(), "203.0.113.0/24");
    assert_eq!(network.peek(&net).await.unwrap().remaining, 100 - 4);
    // A check and its refund through the handle.
    let d = network.check(&net, 1).await.unwrap();
    assert!(d.allowed);
    network.refund(&net, 1, network.now()).await.unwrap();
    assert_eq!(network.peek(&net).await.unwrap().remaining, 100 - 4);
    assert!(network.key("not an ip").is_err());
}

/// A key written by hand is the key the layer's extractor writes: an
/// address masked to the limit's network, a network of the limit's
/// length (host bits masked); a network of another length is refused,
/// naming the limit, never taken as its first address.
#[test]
fn ip_keys_are_written_as_the_extractor_writes_them() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let router: Router = Router::new().route("/login", post(|| async { "ok" }));
    let (_, limits) = table
        .apply_in_memory(router, &PolicyOptions::default(), None)
        .unwrap();
    let (login, network) = (limits.get("login").unwrap(), limits.get("network").unwrap());
    let written = |limit: &tower_ratelimit::policy::LimitHandle, text: &str| {
        limit.key(text).map(|k| k.to_string())
    };
    for (text, key) in [
        ("198.51.100.7", "198.51.100.7"),
        ("198.51.100.7/32", "198.51.100.7"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("2001:DB8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::9/64", "2001:db8:1:2::/64"),
    ] {
        assert_eq!(written(login, text).as_deref(), Ok(key), "{text}");
    }
    for (text, key) in [
        ("198.51.100.7", "198.51.100.0/24"),
        ("198.51.100.7/24", "198.51.100.0/24"),
        ("2001:db8:1:2::5", "2001:db8:1::/48"),
        ("2001:db8:1::/48", "2001:db8:1::/48"),
    ] {
        assert_eq!(written(network, text).as_deref(), Ok(key), "{text}");
    }
    for (limit, text, why) in [
        (
            login,
            "198.51.100.0/24",
            "keys each IPv4 client by its /32, so a /24",
        ),
        (
            login,
            "2001:db8::/48",
            "keys each IPv6 client by its /64, so a /48",
        ),
        (login, "2001:db8::1/128", "so a /128"),
        (network, "198.51.100.0/16", "by its /24, so a /16"),
        (network, "198.51.100.7/32", "so a /32"),
    ] {
        let e = limit.key(text).unwrap_err();
        assert!(
            e.contains(why) && e.contains("not one client's key"),
            "{text}: {e}"
        );
        assert!(
            e.contains(&format!("limit {:?}", limit.name())),
            "{text}: {e}"
        );
    }
}

#[tokio::test]
async fn a_builder_layer_gives_its_stores() {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "login",
            MemoryStore::new(SlidingLog::new(1, Duration::from_secs(3600)).unwrap()),
        )
        .build()
        .unwrap();
    let app = Router::new()
        .route("/login", post(|| async { "ok" }))
        .layer(layer.clone());
    assert_eq!(login(&app, "192.0.2.1:1").await, StatusCode::OK);
    assert_eq!(
        login(&app, "192.0.2.1:1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let store = layer.store("login").unwrap();
    assert!(layer.store("other").is_none());
    let key = IpPrefixes::default().key([192, 0, 2, 1].into());
    store.reset(&key).value().unwrap();
    assert_eq!(login(&app, "192.0.2.1:1").await, StatusCode::OK);
}
