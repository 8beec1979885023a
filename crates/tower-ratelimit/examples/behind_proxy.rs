//! Behind a proxy or load balancer: 2 new accounts per day per *client*
//! IP, read from the one header your proxies write, and only when the
//! request comes from one of them. A client's own forwarding headers
//! change nothing.
//!
//! ```text
//! # curl on this machine plays the proxy (127.0.0.1 is trusted here)
//! TRUSTED_PROXIES=127.0.0.1/32,::1/128 cargo run -p tower-ratelimit --example behind_proxy
//! curl -i -X POST -H 'X-Forwarded-For: 198.51.100.7' 127.0.0.1:3000/accounts  # 201, 201, 429
//! curl -i -X POST -H 'X-Forwarded-For: 198.51.100.8' 127.0.0.1:3000/accounts  # 201: another client
//! ```
//!
//! `TRUSTED_PROXIES`: the proxies' CIDRs, comma-separated (none by
//! default: every request is keyed by its TCP peer). `TRUSTED_PROXY_HEADER`:
//! `x-forwarded-for` (default), `forwarded`, or a single-address header
//! such as `x-real-ip`, `cf-connecting-ip`, `fly-client-ip`.

use axum::{http::StatusCode, routing::post, Router};
use std::{env, error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::key::{ClientIp, ProxyHeader};
use tower_ratelimit::{MemoryStore, RateLimitLayer, SlidingLog};

fn app(trusted_proxies: &str, header: &str) -> Result<Router, Box<dyn Error>> {
    // A bad CIDR or header name is an error naming it, at startup.
    let client_ip = trusted_proxies
        .parse::<ClientIp>()?
        .header(header.parse::<ProxyHeader>()?);
    let store = MemoryStore::new(SlidingLog::new(2, Duration::from_secs(86_400))?);
    let create = || async { (StatusCode::CREATED, "account created\n") };
    Ok(Router::new()
        .route("/accounts", post(create))
        .route_layer(RateLimitLayer::new(store, client_ip)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let proxies = env::var("TRUSTED_PROXIES").unwrap_or_default();
    let header = env::var("TRUSTED_PROXY_HEADER").unwrap_or_else(|_| "x-forwarded-for".into());
    let app = app(&proxies, &header)?.into_make_service_with_connect_info::<SocketAddr>();
    let addr = env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::from;

    const PROXY: &str = "10.0.0.5:50000";

    #[tokio::test]
    async fn keyed_by_the_client_the_trusted_proxy_names() {
        let app = super::app("10.0.0.0/8", "x-forwarded-for").unwrap();
        let post = |peer, xff| from(peer, "POST", "/accounts").header("x-forwarded-for", xff);
        // A forged leftmost entry changes nothing: the proxy appended the
        // client's real address, read from the right.
        for forged in ["1.1.1.1, 198.51.100.7", "2.2.2.2, 198.51.100.7"] {
            assert_eq!(post(PROXY, forged).status(&app).await, 201);
        }
        assert_eq!(post(PROXY, "198.51.100.7").status(&app).await, 429);
        assert_eq!(post(PROXY, "198.51.100.8").status(&app).await, 201);
    }

    #[tokio::test]
    async fn an_untrusted_peer_is_keyed_by_its_own_address() {
        let app = super::app("10.0.0.0/8", "x-forwarded-for").unwrap();
        let post = |xff| from("203.0.113.9:1", "POST", "/accounts").header("x-forwarded-for", xff);
        assert_eq!(post("198.51.100.1").status(&app).await, 201);
        assert_eq!(post("198.51.100.2").status(&app).await, 201);
        assert_eq!(post("198.51.100.3").status(&app).await, 429);
    }

    #[tokio::test]
    async fn a_single_address_header_and_bad_settings() {
        let app = super::app("10.0.0.0/8", "x-real-ip").unwrap();
        let post = |ip| from(PROXY, "POST", "/accounts").header("x-real-ip", ip);
        assert_eq!(post("198.51.100.7").status(&app).await, 201);
        assert_eq!(post("198.51.100.7").status(&app).await, 201);
        assert_eq!(post("198.51.100.7").status(&app).await, 429);
        // X-Forwarded-For is not the header this proxy writes: ignored.
        let xff = from(PROXY, "POST", "/accounts").header("x-forwarded-for", "198.51.100.9");
        assert_eq!(xff.status(&app).await, 201);
        assert!(super::app("10.0.0.0/33", "x-forwarded-for").is_err());
        assert!(super::app("10.0.0.0/8", "not a header").is_err());
    }
}
