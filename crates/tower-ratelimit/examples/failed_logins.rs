//! Count only failures: 5 failed logins per hour per client IP; then every
//! attempt from that address gets 429 for the rest of the hour. Successful
//! logins cost nothing. Each attempt reserves its slot before the password
//! is checked and gets it back unless it fails (401), so concurrent
//! guesses cannot slip past the limit.
//!
//! ```text
//! cargo run -p tower-ratelimit --example failed_logins
//! curl -i -d 'open sesame' 127.0.0.1:3000/login   # 200, as often as you like
//! curl -i -d 'guess' 127.0.0.1:3000/login         # 401 five times, then 429
//! ```

use axum::{http::StatusCode, routing::post, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::strategy::StatusIs;
use tower_ratelimit::{key::PeerIp, MemoryStore, RateLimitLayer, SlidingLog};

fn app() -> Result<Router, Box<dyn Error>> {
    let store = MemoryStore::new(SlidingLog::new(5, Duration::from_secs(3600))?);
    let failures = RateLimitLayer::builder(PeerIp::new())
        .limit("login-failures", store)
        .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
        .build()?;
    Ok(Router::new()
        .route("/login", post(login))
        .route_layer(failures))
}

/// The body is the password (a real app checks a user's hash).
async fn login(password: String) -> (StatusCode, &'static str) {
    match password.as_str() {
        "open sesame" => (StatusCode::OK, "welcome\n"),
        _ => (StatusCode::UNAUTHORIZED, "wrong password\n"),
    }
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
    async fn five_failures_per_hour_successes_free() {
        let app = super::app().unwrap();
        let login = |password| from("203.0.113.7:1", "POST", "/login").body(password);
        for _ in 0..10 {
            assert_eq!(login("open sesame").status(&app).await, 200);
        }
        for _ in 0..5 {
            assert_eq!(login("guess").status(&app).await, 401);
        }
        // Now even the right password waits: the address guessed enough.
        let res = login("open sesame").send(&app).await;
        assert_eq!(res.status(), 429);
        assert_eq!(header(&res, "retry-after"), "3600");
        let other = from("198.51.100.1:1", "POST", "/login").body("guess");
        assert_eq!(other.status(&app).await, 401);
    }
}
