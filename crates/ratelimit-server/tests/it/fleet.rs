//! Two `ratelimitd` processes on one real redis-server: a limit of 10 a minute admits exactly 10 between them, a refused request takes nothing from its other descriptors, and a ban made on one holds on the other.

use crate::binary::{config_file, grpc_addr, ratelimitd, terminate};
use crate::harness::{descriptor, request};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use ratelimit_test_support::spawned::Spawned;
use ratelimit_test_support::RedisServer;
use tonic::transport::Channel;

/// Windows open at a key's first request: no test straddles a boundary.
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
algorithm = "fixed-window 10/1m anchor first-request"
descriptors = [{{ key = "remote_address" }}]

[[limit]]
name = "per-user"
domain = "edge"
algorithm = "fixed-window 5/1m anchor first-request"
descriptors = [{{ key = "user" }}]

[[limit]]
name = "login"
domain = "auth"
algorithm = "fixed-window 1/1m anchor first-request"
descriptors = [{{ key = "remote_address" }}]
ban = "1h"
"#
    )
}

/// One process and a gRPC client of it.
struct Process {
    server: Spawned,
    client: RateLimitServiceClient<Channel>,
}

impl Process {
    async fn start(config: &std::path::Path) -> Self {
        let server = Spawned::start(ratelimitd(&config.to_path_buf()));
        let url = format!("http://{}", grpc_addr(&server));
        let client = RateLimitServiceClient::connect(url)
            .await
            .expect("gRPC connect");
        Self { server, client }
    }

    async fn rls(&self, request: RateLimitRequest) -> RateLimitResponse {
        let answer = self.client.clone().should_rate_limit(request).await;
        answer.expect("ShouldRateLimit").into_inner()
    }

    async fn stop(self) {
        let Self { server, client } = self;
        let (status, server) = terminate(server).await;
        drop(client);
        assert!(status.success(), "{status:?}: {:#?}", server.log);
    }
}

fn edge(entries: &[&[(&str, &str)]], hits: Option<u64>) -> RateLimitRequest {
    let descriptors = entries.iter().map(|e| descriptor(e, hits)).collect();
    request("edge", descriptors, 0)
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

#[tokio::test]
async fn two_processes_on_one_redis_share_limits_all_or_nothing_and_bans() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let path = config_file("fleet.toml", &limits(&redis.url()));
    let (a, b) = (Process::start(&path).await, Process::start(&path).await);
    // 10 a minute, calls alternated: exactly 10 admitted.
    let ip: &[(&str, &str)] = &[("remote_address", "10.4.0.1")];
    let mut admitted = 0;
    for i in 0..20 {
        let process = if i % 2 == 0 { &a } else { &b };
        if process.rls(edge(&[ip], None)).await.overall_code == OK {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
    // All or nothing: alice's descriptor first, then the spent address.
    let alice: &[(&str, &str)] = &[("user", "alice")];
    for process in [&a, &b, &a] {
        let r = process.rls(edge(&[alice, ip], None)).await;
        assert_eq!(r.overall_code, OVER);
        assert_eq!((r.statuses[0].code, r.statuses[1].code), (OK, OVER));
    }
    // alice took nothing on either process: a peek on the other says 5.
    let peek = b.rls(edge(&[alice], Some(0))).await;
    assert_eq!(peek.statuses[0].limit_remaining, 5);
    // A ban earned on one process holds on the other: an hour, not the
    // window's minute.
    let login = |addr: &'static str| {
        let d = descriptor(&[("remote_address", addr)], None);
        request("auth", vec![d], 0)
    };
    assert_eq!(a.rls(login("10.4.0.9")).await.overall_code, OK);
    assert_eq!(a.rls(login("10.4.0.9")).await.overall_code, OVER);
    let banned = b.rls(login("10.4.0.9")).await;
    assert_eq!(banned.overall_code, OVER);
    let until = banned.statuses[0].duration_until_reset.expect("a reset");
    assert!(until.seconds > 3500, "{until:?}");
    assert_eq!(b.rls(login("10.4.0.10")).await.overall_code, OK);
    a.stop().await;
    b.stop().await;
}
