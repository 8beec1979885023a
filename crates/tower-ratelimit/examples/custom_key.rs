//! A custom key: limit each signed-in user, found in a `session` cookie,
//! to 200 requests per day (a sliding window). A key extractor is any
//! `Fn(&Parts) -> Result<K, KeyError>`; the error's status (here 401) is
//! what a request without a key gets.
//!
//! ```text
//! cargo run -p tower-ratelimit --example custom_key
//! curl -i -b 'session=alice' 127.0.0.1:3000/   # RateLimit: "default";r=199;...
//! curl -i 127.0.0.1:3000/                      # 401: missing session cookie
//! ```

use axum::http::{header::COOKIE, request::Parts, StatusCode};
use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::key::{HeaderKey, KeyError};
use tower_ratelimit::{MemoryStore, RateLimitLayer, SlidingWindow};

/// The `session` cookie's value. A key outlives the request: `HeaderKey`
/// copies at most 64 bytes (a longer value becomes its keyed hash), never
/// the request's buffers. A real app would look the session up first.
fn session(req: &Parts) -> Result<HeaderKey, KeyError> {
    let cookies = req
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    cookies
        .flat_map(|line| line.split(';'))
        .find_map(|cookie| cookie.trim().strip_prefix("session="))
        .filter(|value| !value.is_empty())
        .map(|value| HeaderKey::new(value.as_bytes()))
        .ok_or(KeyError::missing("session cookie").with_status(StatusCode::UNAUTHORIZED))
}

fn app() -> Result<Router, Box<dyn Error>> {
    let store = MemoryStore::new(SlidingWindow::new(200, Duration::from_secs(86_400))?);
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(store, session)))
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
    use super::support::{from, text};

    #[tokio::test]
    async fn two_hundred_a_day_per_session() {
        let app = super::app().unwrap();
        // The user, not the address: from anywhere, one budget.
        let get = |peer, cookie| from(peer, "GET", "/").header("cookie", cookie);
        for i in 0..200 {
            let peer = if i % 2 == 0 {
                "203.0.113.7:1"
            } else {
                "198.51.100.1:1"
            };
            assert_eq!(
                get(peer, "theme=dark; session=alice").status(&app).await,
                200
            );
        }
        assert_eq!(get("192.0.2.1:1", "session=alice").status(&app).await, 429);
        assert_eq!(get("203.0.113.7:1", "session=bob").status(&app).await, 200);
        let res = from("203.0.113.7:1", "GET", "/").send(&app).await;
        assert_eq!(res.status(), 401);
        assert!(text(res).await.contains("session cookie"));
    }
}
