//! Cost per request: each client IP has 1,000 units an hour (GCRA);
//! `GET /items` costs 1, `POST /bulk?count=N` costs N (at most 1,000). A
//! request whose cost does not fit is refused and consumes nothing.
//!
//! ```text
//! cargo run -p tower-ratelimit --example cost_per_request
//! curl -i -X POST '127.0.0.1:3000/bulk?count=600'  # 200, RateLimit: "default";r=400;...
//! curl -i -X POST '127.0.0.1:3000/bulk?count=600'  # 429: 400 left
//! curl -i 127.0.0.1:3000/items                     # 200, r=399
//! ```

use axum::http::request::Parts;
use axum::{routing::get, routing::post, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};

/// `?count=N` (from 1 to 1,000); 1 without it.
fn cost(req: &Parts) -> u64 {
    let count = req.uri.query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("count=")?.parse::<u64>().ok())
    });
    count.unwrap_or(1).clamp(1, 1000)
}

fn app() -> Result<Router, Box<dyn Error>> {
    let store = MemoryStore::new(Gcra::new(1000, Duration::from_secs(3600))?);
    let budget = RateLimitLayer::builder(PeerIp::new())
        .limit("default", store)
        .cost(cost)
        .build()?;
    Ok(Router::new()
        .route("/items", get(|| async { "[]\n" }))
        .route("/bulk", post(|| async { "done\n" }))
        .layer(budget))
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
    async fn a_bulk_request_costs_its_count() {
        let app = super::app().unwrap();
        let req = |method, uri| from("203.0.113.7:1", method, uri);
        let res = req("POST", "/bulk?count=600").send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").starts_with("\"default\";r=400;"));
        assert_eq!(req("POST", "/bulk?count=600").status(&app).await, 429);
        let res = req("GET", "/items").send(&app).await;
        assert!(header(&res, "ratelimit").starts_with("\"default\";r=399;"));
        assert_eq!(req("POST", "/bulk?x=1&count=399").status(&app).await, 200);
        assert_eq!(req("GET", "/items").status(&app).await, 429);
        // Another client's budget is whole; a huge count costs 1,000.
        assert_eq!(
            from("198.51.100.1:1", "POST", "/bulk?count=9999")
                .status(&app)
                .await,
            200
        );
        assert_eq!(
            from("198.51.100.1:1", "GET", "/items").status(&app).await,
            429
        );
    }
}
