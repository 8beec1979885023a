//! One limit around the whole `Router`: 60 requests per minute per client
//! IP, whatever the path, checked before routing. Unknown paths count too
//! (a scanner probing for `/wp-admin` spends its budget), and a refused
//! request costs less than one served by a route. Per-route limits go
//! inside the router instead, with `route_layer` (see the other recipes).
//!
//! ```text
//! cargo run -p tower-ratelimit --example whole_router
//! curl -i 127.0.0.1:3000/nope   # 404, RateLimit: "default";r=59;...
//! ```

use axum::{extract::Request, routing::get, Router, ServiceExt};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_layer::Layer;
use tower_ratelimit::key::{IpKey, PeerIp};
use tower_ratelimit::{Gcra, MemoryStore, RateLimit, RateLimitLayer};

type App = RateLimit<Router, PeerIp, MemoryStore<Gcra, IpKey>>;

fn app() -> Result<App, Box<dyn Error>> {
    let store = MemoryStore::new(Gcra::new(60, Duration::from_secs(60))?);
    let router = Router::new()
        .route("/", get(|| async { "home\n" }))
        .route("/about", get(|| async { "about\n" }));
    Ok(RateLimitLayer::new(store, PeerIp::new()).layer(router))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // `ServiceExt` of axum: the connect-info service of any `Service<Request>`.
    let app = ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app()?);
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::{from, header};

    #[tokio::test]
    async fn every_path_shares_one_budget() {
        let app = super::app().unwrap();
        let get = |path| from("203.0.113.7:1", "GET", path);
        for path in ["/", "/about", "/wp-admin"].into_iter().cycle().take(60) {
            assert_ne!(get(path).status(&app).await, 429);
        }
        let res = get("/nope").send(&app).await;
        assert_eq!(res.status(), 429);
        assert!(header(&res, "ratelimit").starts_with("\"default\";r=0;"));
        assert_eq!(get("/").status(&app).await, 429);
        assert_eq!(from("198.51.100.1:1", "GET", "/").status(&app).await, 200);
    }
}
