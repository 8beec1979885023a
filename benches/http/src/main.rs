//! `http-bench MODE PORT`: serves `GET /` ("hello") on 127.0.0.1:PORT,
//! bare or behind a rate limiter, for ./run.sh to load with wrk.
//!
//! Modes: `bare`, `ours`, `governor` (everything admitted: 1 per ns, burst
//! 10^9), `ours-limited`, `governor-limited` (one per minute, burst 10: all
//! but the first few requests get 429). Both limiters key on the peer IP
//! and send rate-limit headers on every response.

use axum::{routing::get, Router};
use governor::middleware::StateInformationMiddleware;
use ratelimit_core::{Gcra, MemoryStore};
use std::net::SocketAddr;
use std::time::Duration;
use tower_governor::{governor::GovernorConfigBuilder, key_extractor::PeerIpKeyExtractor, GovernorLayer};
use tower_ratelimit::{key::PeerIp, RateLimitLayer};

fn app() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// `burst` per `burst * interval`, for both limiters alike.
fn ours(interval: Duration, burst: u32) -> Router {
    let per_second = 1_000_000_000 / interval.as_nanos() as u64;
    let gcra = if per_second > 0 {
        Gcra::with_burst(per_second, Duration::from_secs(1), u64::from(burst))
    } else {
        Gcra::with_burst(1, interval, u64::from(burst))
    }
    .expect("valid quota");
    app().layer(RateLimitLayer::new(MemoryStore::new(gcra), PeerIp::new()))
}

/// Like [`ours`], without rate-limit headers on admitted responses.
fn ours_quiet(interval: Duration, burst: u32) -> Router {
    let gcra = Gcra::with_burst(1_000_000_000 / interval.as_nanos() as u64, Duration::from_secs(1), u64::from(burst))
        .expect("valid quota");
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("default", MemoryStore::new(gcra))
        .headers(tower_ratelimit::response::Headers::new().on_allowed(false))
        .build()
        .expect("valid layer");
    app().layer(layer)
}

fn governor(interval: Duration, burst: u32) -> Router {
    let config = GovernorConfigBuilder::<PeerIpKeyExtractor, _>::default()
        .period(interval)
        .burst_size(burst)
        .use_headers()
        .finish()
        .expect("valid quota");
    let _: &governor::RateLimiter<_, _, _, StateInformationMiddleware> = config.limiter();
    app().layer(GovernorLayer::new(config))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, port) = match args.as_slice() {
        [_, mode, port] => (mode.as_str(), port.parse::<u16>().expect("port")),
        _ => {
            eprintln!("usage: http-bench bare|ours|governor|ours-limited|governor-limited PORT");
            std::process::exit(2);
        }
    };
    let open = (Duration::from_nanos(1), 1_000_000_000);
    let limited = (Duration::from_secs(60), 10);
    let router = match mode {
        "bare" => app(),
        "ours" => ours(open.0, open.1),
        "governor" => governor(open.0, open.1),
        "ours-quiet" => ours_quiet(open.0, open.1),
        "ours-limited" => ours(limited.0, limited.1),
        "governor-limited" => governor(limited.0, limited.1),
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serve");
}
