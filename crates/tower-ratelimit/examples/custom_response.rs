//! A custom response: a plain-text 429 instead of the default
//! `application/problem+json` body. A response builder is any
//! `Fn(Rejection<'_>) -> Response<B>`; the layer still adds `Retry-After`
//! and the `RateLimit` headers (unless the builder set them). Here: 5
//! requests per minute per client IP.
//!
//! ```text
//! cargo run -p tower-ratelimit --example custom_response
//! for i in $(seq 6); do curl -s 127.0.0.1:3000/; done   # the 6th: "Slow down! Try again in 12 s."
//! ```

use axum::{http::StatusCode, response::IntoResponse, response::Response};
use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::response::{ProblemJson, Rejection, ResponseBuilder};
use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};

fn plain_text(rejection: Rejection<'_>) -> Response {
    match rejection {
        Rejection::Limited(info) => {
            let wait = info
                .retry_after()
                .map_or(0, |d| d.as_secs_f64().ceil() as u64);
            let text = format!("Slow down! Try again in {wait} s.\n");
            (StatusCode::TOO_MANY_REQUESTS, text).into_response()
        }
        // No key (400), or the store failed with a fail-closed policy (503):
        // the default body.
        other => ProblemJson::new().build(other),
    }
}

fn app() -> Result<Router, Box<dyn Error>> {
    let store = MemoryStore::new(Gcra::new(5, Duration::from_secs(60))?);
    let limit = RateLimitLayer::builder(PeerIp::new())
        .limit("default", store)
        .response(plain_text)
        .build()?;
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(limit))
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
    use super::support::{from, header, text};

    #[tokio::test]
    async fn a_plain_text_429_with_the_usual_headers() {
        let app = super::app().unwrap();
        let get = || from("203.0.113.7:1", "GET", "/");
        for _ in 0..5 {
            assert_eq!(get().status(&app).await, 200);
        }
        let res = get().send(&app).await;
        assert_eq!(res.status(), 429);
        assert_eq!(header(&res, "retry-after"), "12");
        assert!(header(&res, "ratelimit").starts_with("\"default\";r=0;"));
        assert_eq!(text(res).await, "Slow down! Try again in 12 s.\n");
    }
}
