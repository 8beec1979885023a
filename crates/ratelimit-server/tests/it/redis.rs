//! Two servers on one real Redis (a private redis-server per test) share each key's limit.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_server::Config;
use ratelimit_test_support::RedisServer;

fn limits(url: &str) -> String {
    format!(
        r#"
[store]
kind = "redis"
url = "{url}"
timeout = "2s"

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "gcra 10/1h burst 10"
descriptors = [{{ key = "remote_address" }}]
"#
    )
}

#[tokio::test]
async fn two_servers_on_one_redis_admit_exactly_10_in_total() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let toml = limits(&redis.url());
    let (a, b) = (Harness::start(&toml).await, Harness::start(&toml).await);
    let mut admitted = 0;
    for i in 0..20 {
        let server = if i % 2 == 0 { &a } else { &b };
        let r = server
            .rls(request(
                "edge",
                vec![descriptor(&[("remote_address", "10.2.0.1")], None)],
                0,
            ))
            .await;
        if r.overall_code == Code::Ok as i32 {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
    // Through HTTP too: the same key, the same state.
    let body = r#"{"limit":"per-ip","key":"10.2.0.1"}"#;
    assert_eq!(a.http("POST", "/check", &[], body).await.status, 429);
    a.running.stop().await;
    b.running.stop().await;
}

#[test]
fn a_bad_redis_url_is_refused_at_load_naming_its_line() {
    let err = Config::parse(&limits("http://nowhere"), "f.toml", |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("f.toml:4: [store] url: bad redis url http://nowhere"),
        "{err}"
    );
}

#[tokio::test]
async fn a_store_failure_is_unavailable_in_grpc_and_503_in_http() {
    // Nothing listens on port 1: every check fails at once.
    let h = Harness::start(&limits("redis://127.0.0.1:1/")).await;
    let err = h
        .grpc
        .clone()
        .should_rate_limit(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.2.0.3")], None)],
            0,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    let body = r#"{"limit":"per-ip","key":"10.2.0.3"}"#;
    let a = h.http("POST", "/check", &[], body).await;
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.body.contains("the store failed"), "{}", a.body);
    h.running.stop().await;
}

#[tokio::test]
async fn a_settlement_on_one_server_is_seen_by_the_other() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let toml = limits(&redis.url());
    let (a, b) = (Harness::start(&toml).await, Harness::start(&toml).await);
    let check = r#"{"limit":"per-ip","key":"10.2.0.3"}"#;
    let r = a.http("POST", "/check", &[], check).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let at = r
        .body
        .split("\"at\":")
        .nth(1)
        .unwrap()
        .trim_end_matches('}');
    let settle = |reserved: u64, actual: u64| {
        format!(
            r#"{{"limit":"per-ip","key":"10.2.0.3","reserved":{reserved},"actual":{actual},"admitted_at":{at}}}"#
        )
    };
    // 1 reserved, 15 used: past the 10, in debt on both servers.
    let s = b.http("POST", "/settle", &[], &settle(1, 15)).await;
    assert_eq!(s.status, 200, "{}", s.body);
    assert!(s.body.contains("\"allowed\":false"), "{}", s.body);
    assert_eq!(a.http("POST", "/check", &[], check).await.status, 429);
    // Given back down to 6 (a refund of 9, within the burst): 4 left.
    let s = b.http("POST", "/settle", &[], &settle(15, 6)).await;
    assert!(s.body.contains("\"remaining\":4"), "{}", s.body);
    // On the server that settled at once (the other's deny cache may
    // keep its denial for up to 1 s: ALGORITHMS.md's bound).
    assert_eq!(b.http("POST", "/check", &[], check).await.status, 200);
    a.running.stop().await;
    b.running.stop().await;
}
