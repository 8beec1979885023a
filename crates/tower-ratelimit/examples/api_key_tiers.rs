//! API-key tiers with an anonymous fallback, GitHub and Stripe style: a
//! `free` key gets 5,000 requests per hour, a `pro` key a token bucket of
//! 500 refilled at 100 per second, and requests without a key 60 per hour
//! per client IP. An unknown key gets 401 and counts as anonymous, so
//! guessing keys is limited too.
//!
//! ```text
//! cargo run -p tower-ratelimit --example api_key_tiers
//! curl -i -H 'X-API-Key: demo-pro' 127.0.0.1:3000/items   # RateLimit: "pro";r=499;t=1
//! curl -i 127.0.0.1:3000/items                            # RateLimit: "anonymous";r=59;...
//! curl -i -H 'X-API-Key: guess' 127.0.0.1:3000/items      # 401, RateLimit: "anonymous";r=58;...
//! ```

use axum::http::request::Parts;
use axum::http::{header::WWW_AUTHENTICATE, HeaderMap, StatusCode};
use axum::{response::IntoResponse, routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::key::{ApiKey, HeaderKey, IpKey, PeerIp};
use tower_ratelimit::strategy::{KeyErrorPolicy, Selection};
use tower_ratelimit::{AnyAlgorithm, FixedWindow, MemoryStore, RateLimitLayer, TokenBucket};

/// The keys and their plans: 0 is `free`, 1 is `pro` (the order of the
/// limits below). Yours come from a database; these are public.
fn plan(headers: &HeaderMap) -> Option<usize> {
    match headers.get("x-api-key")?.as_bytes() {
        b"demo-free" => Some(0),
        b"demo-pro" => Some(1),
        _ => None,
    }
}

fn app() -> Result<Router, Box<dyn Error>> {
    const HOUR: Duration = Duration::from_secs(3600);
    let free = FixedWindow::new(5000, HOUR)?;
    let pro = TokenBucket::new(500, 100, Duration::from_secs(1))?;
    // A known key: its plan's limit. Without a key: the next layer decides.
    let keyed = RateLimitLayer::builder(ApiKey::new())
        .limit("free", MemoryStore::new(AnyAlgorithm::from(free)))
        .limit("pro", MemoryStore::new(AnyAlgorithm::from(pro)))
        .select(|req: &Parts, _key: &HeaderKey| {
            plan(&req.headers).map_or(Selection::NONE, Selection::only)
        })
        .on_key_error(KeyErrorPolicy::AllowMissing)
        .build()?;
    // No key or an unknown one: 60 per hour per client IP.
    let anonymous = RateLimitLayer::builder(PeerIp::new())
        .limit("anonymous", MemoryStore::new(FixedWindow::new(60, HOUR)?))
        .select(|req: &Parts, _ip: &IpKey| match plan(&req.headers) {
            Some(_) => Selection::NONE,
            None => Selection::ALL,
        })
        .build()?;
    Ok(Router::new()
        .route("/items", get(items))
        .route_layer(keyed)
        .route_layer(anonymous))
}

async fn items(headers: HeaderMap) -> impl IntoResponse {
    if headers.contains_key("x-api-key") && plan(&headers).is_none() {
        let challenge = [(WWW_AUTHENTICATE, "ApiKey realm=\"items\"")];
        return (StatusCode::UNAUTHORIZED, challenge, "unknown API key\n").into_response();
    }
    "[\"apple\", \"banana\"]\n".into_response()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let app = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::{from, header};

    const PEER: &str = "203.0.113.7:40000";

    #[tokio::test]
    async fn each_plan_its_limit_and_anonymous_by_ip() {
        let app = super::app().unwrap();
        let get = |key: &str| from(PEER, "GET", "/items").header("x-api-key", key);
        let res = get("demo-pro").send(&app).await;
        assert_eq!(header(&res, "ratelimit-policy"), "\"pro\";q=500;w=5");
        assert_eq!(header(&res, "ratelimit"), "\"pro\";r=499;t=1");
        let res = get("demo-free").send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").starts_with("\"free\";r=4999;"));
        for _ in 0..60 {
            assert_eq!(from(PEER, "GET", "/items").status(&app).await, 200);
        }
        let res = from(PEER, "GET", "/items").send(&app).await;
        assert_eq!(res.status(), 429);
        assert!(header(&res, "ratelimit").starts_with("\"anonymous\";r=0;"));
        // Keys are not limited by their client's anonymous use.
        assert_eq!(get("demo-pro").status(&app).await, 200);
    }

    #[tokio::test]
    async fn unknown_keys_are_401_and_count_as_anonymous() {
        let app = super::app().unwrap();
        // A malformed key (with a space) is a 400 from the layer.
        let bad = from(PEER, "GET", "/items").header("x-api-key", "a b");
        assert_eq!(bad.status(&app).await, 400);
        for i in 1..60 {
            let res = from(PEER, "GET", "/items").header("x-api-key", &format!("guess-{i}"));
            let res = res.send(&app).await;
            assert_eq!(res.status(), 401);
            assert_eq!(header(&res, "www-authenticate"), "ApiKey realm=\"items\"");
        }
        let guess = from(PEER, "GET", "/items").header("x-api-key", "guess-60");
        assert_eq!(guess.status(&app).await, 429);
        assert_eq!(from(PEER, "GET", "/items").status(&app).await, 429);
    }
}
