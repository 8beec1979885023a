//! Shaping with the leaky bucket: delay instead of refusing. Each client
//! IP's requests leave at 2 per second; up to 5 wait their turn (held
//! before the handler runs), and only a request finding the queue full
//! gets 429. For work that must be paced (a slow backend, an upstream API
//! that allows 2 calls a second) rather than refused.
//!
//! ```text
//! cargo run -p tower-ratelimit --example shaping
//! for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code} %{time_total}s\n' 127.0.0.1:3000/ & done; wait
//! # six 200s, 0.5 s apart; one 429 at once
//! ```

use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::strategy::Mode;
use tower_ratelimit::{key::PeerIp, Clock, LeakyBucket, MemoryStore, RateLimitLayer, SystemClock};

/// The app on `clock` (tests use tokio's paused clock).
fn app(clock: impl Clock) -> Result<Router, Box<dyn Error>> {
    // 2 leave per second; 5 more may wait.
    let store = MemoryStore::new(LeakyBucket::new(2, Duration::from_secs(1), 5)?);
    let paced = RateLimitLayer::builder(PeerIp::new())
        .limit("paced", store)
        .mode(Mode::Shape)
        .clock(clock)
        .build()?;
    Ok(Router::new()
        .route("/", get(|| async { "done\n" }))
        .layer(paced))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let app = app(SystemClock::new())?.into_make_service_with_connect_info::<SocketAddr>();
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::from;
    use ratelimit_core::TokioClock;
    use tokio::time::{Duration, Instant};

    #[tokio::test(start_paused = true)]
    async fn requests_leave_half_a_second_apart() {
        let app = super::app(TokioClock::new()).unwrap();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..7 {
            let app = app.clone();
            tasks.spawn(async move {
                let status = from("203.0.113.7:1", "GET", "/").status(&app).await;
                (start.elapsed(), status)
            });
        }
        let mut done = tasks.join_all().await;
        done.sort();
        let expected = [
            (0, 200),
            (0, 429),
            (500, 200),
            (1000, 200),
            (1500, 200),
            (2000, 200),
            (2500, 200),
        ];
        assert_eq!(
            done,
            expected.map(|(ms, status)| (Duration::from_millis(ms), status))
        );
    }
}
