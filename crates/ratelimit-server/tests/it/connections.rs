//! Idle connections past the cap: the listeners (tower-ratelimit's `serve`) close the one idle longest, so a new call is answered at once.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tower_ratelimit::serve::ServeOptions;

const LIMITS: &str = r#"
[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 10/1m"
descriptors = [{ key = "remote_address" }]
"#;

/// Far longer than an answer on loopback takes, far shorter than the
/// idle timeout (an hour here), so only shedding can make room.
const ANSWERED_WITHIN: Duration = Duration::from_secs(20);

#[tokio::test]
async fn idle_connections_past_the_cap_do_not_stop_a_new_call() {
    let options = ServeOptions {
        // Two per port (gRPC, HTTP); the timeouts out of the way.
        max_connections: 4,
        idle_timeout: Duration::from_secs(3600),
        header_read_timeout: Duration::from_secs(3600),
        ..ServeOptions::default()
    };
    let config = Config::parse(LIMITS, "caps.toml", |_| None).unwrap();
    let h = Harness::start_serving(config, Arc::new(SystemClock::new()), options).await;
    let (grpc, http) = (h.running.grpc_addr, h.running.http_addr);
    // Connections that send nothing, past the cap on both ports.
    let mut idle = Vec::new();
    for _ in 0..5 {
        idle.push(tokio::net::TcpStream::connect(grpc).await.unwrap());
        idle.push(tokio::net::TcpStream::connect(http).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let call = async {
        let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
            .await
            .expect("gRPC connect");
        let d = descriptor(&[("remote_address", "10.7.0.1")], None);
        client.should_rate_limit(request("edge", vec![d], 0)).await
    };
    let answer = tokio::time::timeout(ANSWERED_WITHIN, call).await;
    let answer = answer.expect("answered while idle connections hold the cap");
    assert_eq!(
        answer.expect("ShouldRateLimit").into_inner().statuses.len(),
        1
    );
    let health = tokio::time::timeout(ANSWERED_WITHIN, h.http("GET", "/health", &[], "")).await;
    assert_eq!(health.expect("answered").status, 200);
    // The cap is in force: idle connections were closed to make room.
    let closed = tokio::time::timeout(ANSWERED_WITHIN, async {
        let mut closed = 0;
        for mut stream in idle {
            let mut buf = [0u8; 1024];
            // The gRPC port's HTTP/2 preface may come first, then the close.
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        closed += 1;
                        break;
                    }
                    Ok(_) if closed >= 4 => break,
                    Ok(_) => continue,
                }
            }
            if closed >= 4 {
                break;
            }
        }
        closed
    })
    .await;
    assert_eq!(closed.expect("closed ones"), 4);
    h.running.stop().await;
}
