//! Redis with an in-memory fallback: 1 ticket per 5 minutes per user (the
//! bearer token), shared by every copy of the app through Redis
//! (`REDIS_URL`, default `redis://127.0.0.1:6379/`). While Redis is down
//! or slow, each copy keeps limiting on its own, in memory, and says so
//! in its log. It runs without Redis too: try it, then start Redis.
//!
//! ```text
//! cargo run -p tower-ratelimit --example redis_fallback
//! curl -i -X POST -H 'Authorization: Bearer alice' 127.0.0.1:3000/tickets   # 201, then 429
//! curl -i -X POST 127.0.0.1:3000/tickets                                    # 401: no token
//! ```

use axum::{http::StatusCode, routing::post, Router};
use ratelimit_redis::RedisStore;
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::{key::Bearer, Gcra, RateLimitLayer};

/// The app on the Redis at `redis_url`, waiting at most `timeout` for each
/// answer before deciding in memory.
fn app(redis_url: &str, timeout: Duration) -> Result<Router, Box<dyn Error>> {
    let store = RedisStore::builder(redis_url, Gcra::new(1, Duration::from_secs(300))?)
        .prefix("tickets:")
        .timeout(timeout)
        .fallback_to_memory(100_000) // the most keys it keeps meanwhile
        .build()?;
    let create = || async { (StatusCode::CREATED, "ticket created\n") };
    Ok(Router::new()
        .route("/tickets", post(create))
        .route_layer(RateLimitLayer::new(store, Bearer::new())))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Outages and fallbacks are logged through `tracing` (`warn`).
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let app = app(&url, Duration::from_millis(50))?;
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::{from, header};
    use ratelimit_test_support::RedisServer;
    use std::time::Duration;

    #[tokio::test]
    async fn without_redis_the_limit_holds_in_memory() {
        // Nothing listens on port 1: every check falls back.
        let app = super::app("redis://127.0.0.1:1/", Duration::from_millis(50)).unwrap();
        let ticket = |user| from("203.0.113.7:1", "POST", "/tickets").header("authorization", user);
        assert_eq!(ticket("Bearer alice").status(&app).await, 201);
        let res = ticket("Bearer alice").send(&app).await;
        assert_eq!(res.status(), 429);
        assert_eq!(header(&res, "retry-after"), "300");
        assert_eq!(ticket("Bearer bob").status(&app).await, 201);
        assert_eq!(
            from("203.0.113.7:1", "POST", "/tickets").status(&app).await,
            401
        );
    }

    /// On a real redis-server: two copies of the app share one limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_copies_share_the_limit_through_redis() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        // A timeout no loaded debug build reaches: a slow answer must not
        // fall back to memory here.
        let patient = Duration::from_secs(5);
        let a = super::app(&server.url(), patient).unwrap();
        let b = super::app(&server.url(), patient).unwrap();
        let ticket = |user| from("203.0.113.7:1", "POST", "/tickets").header("authorization", user);
        assert_eq!(ticket("Bearer alice").status(&a).await, 201);
        // The other copy sees alice's ticket: 1 per 5 minutes, fleet-wide.
        let res = ticket("Bearer alice").send(&b).await;
        assert_eq!(res.status(), 429);
        let retry: u64 = header(&res, "retry-after").parse().unwrap();
        assert!((299..=300).contains(&retry), "{retry}");
        assert_eq!(ticket("Bearer alice").status(&a).await, 429);
        assert_eq!(ticket("Bearer bob").status(&b).await, 201);
        assert_eq!(ticket("Bearer bob").status(&a).await, 429);
    }
}
