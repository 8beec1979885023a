//! A minimal axum server for load tests of the layer:
//! `cargo run --release -p tower-ratelimit --example bench_server -- MODE [ADDR]`
//! with MODE `bare` (no limiter), `admit` (a per-IP limit that admits
//! everything), `admit-quiet` (the same without rate-limit headers) or `limited` (a per-IP limit of 1 per hour: nearly every
//! request gets 429).

use axum::routing::get;
use axum::Router;
use ratelimit_core::{Gcra, MemoryStore};
use std::net::SocketAddr;
use std::time::Duration;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::RateLimitLayer;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "bare".to_owned());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3100".to_owned());
    let app = Router::new().route("/", get(|| async { "hello, world" }));
    let hour = Duration::from_secs(3600);
    let app = match mode.as_str() {
        "bare" => app,
        "admit" => app.layer(RateLimitLayer::new(
            MemoryStore::new(
                Gcra::new(u64::from(u32::MAX), Duration::from_secs(1)).expect("valid"),
            ),
            PeerIp::new(),
        )),
        "admit-quiet" => app.layer(
            RateLimitLayer::builder(PeerIp::new())
                .limit(
                    "open",
                    MemoryStore::new(
                        Gcra::new(u64::from(u32::MAX), Duration::from_secs(1)).expect("valid"),
                    ),
                )
                .headers(tower_ratelimit::response::Headers::none())
                .build()
                .expect("valid"),
        ),
        "limited" => app.layer(RateLimitLayer::new(
            MemoryStore::new(Gcra::new(1, hour).expect("valid")),
            PeerIp::new(),
        )),
        other => {
            eprintln!("unknown mode {other}: bare, admit or limited");
            std::process::exit(2);
        }
    };
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    eprintln!("bench_server ({mode}) on {addr}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serve");
}
