//! `GET /ready` asks the stores: 503 while Redis is down or refuses the password, 200 when it answers.

use crate::harness::Harness;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use ratelimit_test_support::RedisServer;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn on_redis(url: &str) -> Config {
    let text = format!(
        r#"
[store]
kind = "redis"
url = "{url}"
timeout = "200ms"

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "gcra 10/1m"
descriptors = [{{ key = "remote_address" }}]
"#
    );
    Config::parse(&text, "ready.toml", |_| None).unwrap()
}

/// `/ready`'s status and body, once it is `want` (for at most 20 s).
async fn ready_becomes(h: &Harness, want: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = h.http("GET", "/ready", &[], "").await;
        if a.status == want || Instant::now() > deadline {
            assert_eq!(a.status, want, "{}", a.body);
            return a.body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn ready_follows_redis_down_and_back() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let h = Harness::start_config(on_redis(&redis.url()), Arc::new(SystemClock::new())).await;
    ready_becomes(&h, 200).await;
    redis.kill();
    let body = ready_becomes(&h, 503).await;
    assert!(body.contains("limit \"per-ip\""), "{body}");
    redis.restart();
    ready_becomes(&h, 200).await;
    h.running.stop().await;
}

#[tokio::test]
async fn ready_is_503_when_redis_refuses_the_password() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // Set once started (the harness's start pings without a password).
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    conn.write_all(b"CONFIG SET requirepass not-the-one-given\r\n")
        .unwrap();
    let mut reply = [0u8; 5];
    conn.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    let url = format!("redis://:wrong@127.0.0.1:{}/", redis.port);
    let h = Harness::start_config(on_redis(&url), Arc::new(SystemClock::new())).await;
    let a = h.http("GET", "/ready", &[], "").await;
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.body.contains("limit \"per-ip\""), "{}", a.body);
    h.running.stop().await;
}
