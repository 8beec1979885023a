//! Per client IP: at most 2 new accounts per day from each address (IPv6
//! per /64), counted in a sliding log (any 24 hours, not calendar days).
//!
//! ```text
//! cargo run -p tower-ratelimit --example per_ip
//! curl -i -X POST 127.0.0.1:3000/accounts   # twice 201, then 429 with Retry-After
//! ```
//!
//! Serve with `into_make_service_with_connect_info`: the key is the TCP
//! peer's address, which axum passes in `ConnectInfo`.

use axum::{http::StatusCode, routing::post, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::{MemoryStore, RateLimitLayer, SlidingLog};

fn app() -> Result<Router, Box<dyn Error>> {
    // Clients choose how many addresses they come from: cap the keys kept.
    let store = MemoryStore::builder(SlidingLog::new(2, Duration::from_secs(86_400))?)
        .max_keys(Some(1_000_000))
        .build()?;
    let create = || async { (StatusCode::CREATED, "account created\n") };
    Ok(Router::new()
        .route("/accounts", post(create))
        .route_layer(RateLimitLayer::new(store, PeerIp::new())))
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

    #[tokio::test]
    async fn two_accounts_per_day_per_address() {
        let app = super::app().unwrap();
        let post = |peer| from(peer, "POST", "/accounts");
        assert_eq!(post("203.0.113.7:1000").status(&app).await, 201);
        assert_eq!(post("203.0.113.7:2000").status(&app).await, 201);
        let res = post("203.0.113.7:3000").send(&app).await;
        assert_eq!(res.status(), 429);
        assert_eq!(header(&res, "retry-after"), "86400");
        // Another address has its own 2; the same IPv6 /64 shares them.
        assert_eq!(post("198.51.100.1:1000").status(&app).await, 201);
        assert_eq!(post("[2001:db8::1]:1").status(&app).await, 201);
        assert_eq!(post("[2001:db8::2]:1").status(&app).await, 201);
        assert_eq!(post("[2001:db8::3]:1").status(&app).await, 429);
    }
}
