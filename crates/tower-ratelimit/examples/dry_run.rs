//! Dry-run rollout: decide and report, never refuse. Try a new limit (10
//! per minute per client IP) on live traffic first: requests over it still
//! go through, the `RateLimit` headers say `r=0`, the handler sees that it
//! would have been limited, and the layer logs each one (`debug`). Switch
//! to enforcing by dropping `.mode(Mode::DryRun)`.
//!
//! ```text
//! cargo run -p tower-ratelimit --example dry_run
//! for i in $(seq 11); do curl -s 127.0.0.1:3000/; done   # the 11th: "would be limited"
//! # the server logs: DEBUG tower_ratelimit: ... dry run ...
//! ```

use axum::{extract::Extension, routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::strategy::Mode;
use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitInfo, RateLimitLayer};

fn app() -> Result<Router, Box<dyn Error>> {
    let store = MemoryStore::new(Gcra::new(10, Duration::from_secs(60))?);
    let trial = RateLimitLayer::builder(PeerIp::new())
        .limit("trial", store)
        .mode(Mode::DryRun)
        .build()?;
    Ok(Router::new().route("/", get(hello)).layer(trial))
}

async fn hello(Extension(info): Extension<RateLimitInfo>) -> &'static str {
    if info.is_dry_run() {
        "hello (would be limited)\n"
    } else {
        "hello\n"
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // The layer's events go through `tracing`: show its debug lines.
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info,tower_ratelimit=debug".into());
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let app = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::{from, header, text};

    #[tokio::test]
    async fn over_the_limit_still_served_and_marked() {
        let app = super::app().unwrap();
        for _ in 0..10 {
            let res = from("203.0.113.7:1", "GET", "/").send(&app).await;
            assert_eq!(text(res).await, "hello\n");
        }
        for _ in 0..3 {
            let res = from("203.0.113.7:1", "GET", "/").send(&app).await;
            assert_eq!(res.status(), 200);
            assert!(header(&res, "ratelimit").starts_with("\"trial\";r=0;"));
            assert_eq!(text(res).await, "hello (would be limited)\n");
        }
    }
}
