//! The gRPC example served over a real socket and called with tonic's
//! client: 5 `Health/Check` calls per minute per IP, then
//! `RESOURCE_EXHAUSTED` with a `RetryInfo`; `Echo/Say` limited on its own;
//! HTTP/1.1 and garbage on the port leave it serving. The limits run on a
//! `ManualClock`: the tests wait for nothing.

use grpc_example::echo::{EchoClient, SayRequest};
use grpc_example::{Config, Limits, ServeOptions};
use ratelimit_core::ManualClock;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_types::StatusExt;

/// The example served as `main` serves it, with `limits` on a manual
/// clock.
async fn start(limits: Limits) -> (SocketAddr, ManualClock, JoinHandle<()>) {
    start_with(limits, ServeOptions::default()).await
}

async fn start_with(
    limits: Limits,
    options: ServeOptions,
) -> (SocketAddr, ManualClock, JoinHandle<()>) {
    let clock = ManualClock::new();
    let config = Config {
        limits,
        clock: Arc::new(clock.clone()),
        ..Config::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        grpc_example::run(listener, &config, options, std::future::pending())
            .await
            .unwrap();
    });
    (addr, clock, server)
}

async fn channel(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// `Health/Check` of `service` ("" is the whole server).
async fn check(addr: SocketAddr, service: &str) -> Result<ServingStatus, Status> {
    let mut client = HealthClient::new(channel(addr).await);
    let res = client
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await?;
    Ok(res.into_inner().status())
}

async fn say(addr: SocketAddr, message: &str) -> Result<String, Status> {
    let mut client = EchoClient::new(channel(addr).await);
    let res = client
        .say(SayRequest {
            message: message.to_owned(),
        })
        .await?;
    Ok(res.into_inner().message)
}

/// The wait a `RESOURCE_EXHAUSTED` status asks for, checked to be in
/// (0, 60 s].
fn retry_delay(status: &Status) -> Duration {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let delay = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .unwrap_or_else(|| panic!("no RetryInfo in {status:?}"));
    assert!(
        delay > Duration::ZERO && delay <= Duration::from_secs(60),
        "{delay:?}"
    );
    delay
}

#[tokio::test]
async fn five_health_checks_per_minute_then_resource_exhausted() {
    let (addr, clock, server) = start(Limits::default()).await;
    for _ in 0..4 {
        assert_eq!(check(addr, "").await.unwrap(), ServingStatus::Serving);
    }
    assert_eq!(
        check(addr, "demo.v1.Echo").await.unwrap(),
        ServingStatus::Serving
    );
    let status = check(addr, "").await.unwrap_err();
    let delay = retry_delay(&status);
    // One call every 12 s once the burst of 5 is spent.
    assert_eq!(delay, Duration::from_secs(12));
    assert_eq!(
        status.message(),
        "Rate limit \"health-check\" exceeded: retry in 12 seconds."
    );
    // The IETF fields came along, in the trailers.
    let meta = status.metadata();
    assert_eq!(meta.get("retry-after").unwrap(), "12");
    assert_eq!(meta.get("ratelimit").unwrap(), "\"health-check\";r=0;t=12");
    // The own service is not affected...
    assert_eq!(say(addr, "hi").await.unwrap(), "hi");
    // ...and the wait it asked for is enough, not less.
    clock.advance(delay - Duration::from_millis(1));
    assert_eq!(
        check(addr, "").await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(check(addr, "").await.unwrap(), ServingStatus::Serving);
    assert!(!server.is_finished());
    server.abort();
}

#[tokio::test]
async fn echo_has_its_own_limit() {
    let limits = Limits {
        echo: 3,
        ..Limits::default()
    };
    let (addr, _clock, server) = start(limits).await;
    for i in 0..3 {
        assert_eq!(say(addr, &format!("m{i}")).await.unwrap(), format!("m{i}"));
    }
    let status = say(addr, "one too many").await.unwrap_err();
    assert_eq!(retry_delay(&status), Duration::from_secs(20));
    assert!(status.message().contains("\"echo\""), "{status:?}");
    // Health/Check keeps its own 5.
    for _ in 0..5 {
        assert_eq!(check(addr, "").await.unwrap(), ServingStatus::Serving);
    }
    server.abort();
}

/// Sends `bytes` on a new connection and reads until the server closes
/// it (within 10 s): what it answered.
async fn send_raw(addr: SocketAddr, bytes: &[u8]) -> String {
    super::hardening::closed_within(addr, bytes, Duration::from_secs(10))
        .await
        .0
}

#[tokio::test]
async fn http1_and_garbage_do_not_bring_it_down() {
    let (addr, _clock, server) = start(Limits::default()).await;
    assert_eq!(say(addr, "before").await.unwrap(), "before");
    // Plain HTTP/1.1: not HTTP/2, the connection is closed.
    let answer = send_raw(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(!answer.starts_with("HTTP/1.1 2"), "{answer:?}");
    let answer = send_raw(
        addr,
        b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: x\r\n\
          Content-Type: application/grpc\r\nContent-Length: 5\r\n\r\n\0\0\0\0\0",
    )
    .await;
    assert!(!answer.starts_with("HTTP/1.1 2"), "{answer:?}");
    // Random bytes (a fixed seed), alone and after a valid HTTP/2 preface.
    let mut rng = ratelimit_test_support::SplitMix64(0x9e37_79b9_7f4a_7c15);
    let noise: Vec<u8> = (0..16 * 1024).map(|_| rng.next_u64() as u8).collect();
    send_raw(addr, &noise).await;
    let mut after_preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    after_preface.extend_from_slice(&noise);
    send_raw(addr, &after_preface).await;
    // Still serving, both services.
    assert!(!server.is_finished());
    assert_eq!(say(addr, "after").await.unwrap(), "after");
    assert_eq!(check(addr, "").await.unwrap(), ServingStatus::Serving);
    server.abort();
}

#[test]
fn settings_from_the_environment() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let c = Config::from_vars(vars(&[])).unwrap();
    assert_eq!(c.limits, Limits::default());
    assert!(c.client_ip.trusted().is_empty());
    let c = Config::from_vars(vars(&[
        ("RATELIMIT_MAX_KEYS", "1000"),
        ("TRUSTED_PROXIES", "10.0.0.0/8"),
        ("TRUSTED_PROXY_HEADER", "x-real-ip"),
    ]))
    .unwrap();
    assert_eq!(c.limits.max_keys, 1000);
    assert_eq!(c.client_ip.trusted().len(), 1);
    for (bad, var) in [
        (("RATELIMIT_MAX_KEYS", "0"), "RATELIMIT_MAX_KEYS"),
        (("TRUSTED_PROXIES", "10.0.0.0/33"), "TRUSTED_PROXIES"),
        (("TRUSTED_PROXY_HEADER", "x y"), "TRUSTED_PROXY_HEADER"),
    ] {
        let pairs: &'static [(&str, &str)] = Box::leak(Box::new([bad]));
        let Err(e) = Config::from_vars(vars(pairs)) else {
            panic!("{bad:?} accepted");
        };
        assert_eq!(e.variable, var);
    }
}

/// A connection that never completes its HTTP/2 handshake (silent, or a
/// half-sent preface) is closed at the end of its age (10 minutes) plus
/// the grace (10 s), not kept forever. On tokio's paused clock.
#[tokio::test(start_paused = true)]
async fn half_open_connections_are_closed_at_their_age() {
    let (addr, _clock, server) = start(Limits::default()).await;
    let bound = Duration::from_secs(11 * 60);
    for sent in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
        let (_, took) = super::hardening::closed_within(addr, sent, bound).await;
        // Told to go away at 600 s, dropped at 610 s.
        assert!(
            took >= Duration::from_secs(600) && took <= Duration::from_secs(611),
            "closed after {took:?}"
        );
    }
    assert_eq!(say(addr, "still here").await.unwrap(), "still here");
    server.abort();
}

/// Past `max_connections`, new connections wait in the kernel's queue
/// until one closes.
#[tokio::test]
async fn connections_beyond_the_cap_wait_their_turn() {
    let options = ServeOptions {
        max_connections: 2,
        ..ServeOptions::default()
    };
    let (addr, _clock, server) = start_with(Limits::default(), options).await;
    let idle = [
        tokio::net::TcpStream::connect(addr).await.unwrap(),
        tokio::net::TcpStream::connect(addr).await.unwrap(),
    ];
    // The third is queued: no answer while both slots are taken...
    let mut third = tokio::spawn(async move { say(addr, "third").await });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut third).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    // ...and served once one closes.
    drop(idle);
    let answer = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert_eq!(answer.unwrap(), "third");
    server.abort();
}
