//! Several limits on one route: 10 per second (GCRA) *and* 1,000 per day
//! (sliding window) per client IP. A request must fit both, and consumes
//! from neither unless it does. The `RateLimit` headers list both; a 429
//! names the one that refused.
//!
//! ```text
//! cargo run -p tower-ratelimit --example several_limits
//! for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' 127.0.0.1:3000/; done  # 200 x 10, 429 x 2
//! curl -i 127.0.0.1:3000/   # RateLimit: "per-second";r=9;t=1, "per-day";r=989;t=...
//! ```

use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::{key::PeerIp, AnyAlgorithm, Clock, Gcra, MemoryStore, RateLimitLayer};
use tower_ratelimit::{SlidingWindow, SystemClock};

/// The app on `clock` (tests move time on a `ManualClock`).
fn app(clock: impl Clock) -> Result<Router, Box<dyn Error>> {
    // Limits of one layer share a store type: `AnyAlgorithm` mixes them.
    let per_second = AnyAlgorithm::from(Gcra::new(10, Duration::from_secs(1))?);
    let per_day = AnyAlgorithm::from(SlidingWindow::new(1000, Duration::from_secs(86_400))?);
    let limits = RateLimitLayer::builder(PeerIp::new())
        .limit("per-second", MemoryStore::new(per_second))
        .limit("per-day", MemoryStore::new(per_day))
        .clock(clock)
        .build()?;
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(limits))
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
    use super::support::{from, header};
    use std::time::Duration;
    use tower_ratelimit::ManualClock;

    #[tokio::test]
    async fn ten_per_second_and_a_thousand_per_day() {
        let clock = ManualClock::new();
        let app = super::app(clock.clone()).unwrap();
        let get = || from("203.0.113.7:1", "GET", "/");
        for second in 0..100 {
            for _ in 0..10 {
                assert_eq!(get().status(&app).await, 200, "second {second}");
            }
            let res = get().send(&app).await;
            assert_eq!(res.status(), 429);
            assert!(header(&res, "ratelimit").starts_with("\"per-second\";r=0;"));
            clock.advance(Duration::from_secs(1));
        }
        // 1,000 used: now the daily limit refuses, though the second is new.
        let res = get().send(&app).await;
        assert_eq!(res.status(), 429);
        assert!(header(&res, "ratelimit").starts_with("\"per-day\";r=0;"));
        // Two days on (the sliding window weighs the previous day too).
        clock.advance(Duration::from_secs(2 * 86_400));
        for _ in 0..10 {
            assert_eq!(get().status(&app).await, 200);
        }
    }
}
