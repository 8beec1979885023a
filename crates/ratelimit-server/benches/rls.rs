//! ratelimitd's throughput and latency on one core: `ShouldRateLimit` next
//! to a tonic unary echo of the same service (no limiting), and
//! `GET /check` next to a bare axum handler answering 204; and
//! both on Redis (`rls-redis`, `check-redis`: a private redis-server
//! started by the server's process, so on the same core).
//!
//! Run: `cargo bench -p ratelimit-server --bench rls` (options after `--`:
//! `--secs N` per run, default 3; `--callers N` in flight, default 16).
//! Each server runs in a process of its own pinned to core 0
//! (`taskset -c 0`), on a one-worker runtime, with an in-memory store of
//! 10,000 keys (or Redis's, for the `-redis` rows: skipped without
//! redis-server); the client runs pinned to core 1. It prints a Markdown
//! table: calls per second and p50/p99 latency as the client sees it.

#![allow(missing_docs)]

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use ratelimit_server::{Config, Running, State};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u32 = 10_000;

/// ratelimitd's limit: never refuses, so every call takes the full path.
/// `GET /check` keys on the client's address, which the bench's client,
/// as a trusted proxy, sends in `X-Real-IP`.
const POLICY: &str = r#"
[server]
grpc = "127.0.0.1:0"
http = "127.0.0.1:0"

[proxies]
trusted = ["127.0.0.1"]
header = "x-real-ip"

[[limit]]
name = "bench"
domain = "bench"
algorithm = "gcra 1000000000/1s"
descriptors = [{ key = "remote_address" }]
"#;

/// The servers.
const KINDS: [&str; 6] = ["rls", "echo", "check", "axum", "rls-redis", "check-redis"];

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let opt = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(default)
    };
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1]),
        Some("client") => client(&args[1], &args[2], opt("--secs", 3), opt("--callers", 16)),
        _ => orchestrate(opt("--secs", 3), opt("--callers", 16)),
    }
}

/// Runs each server on core 0 and a client on core 1; prints the table.
fn orchestrate(secs: u64, callers: u64) {
    let me = std::env::current_exe().unwrap();
    println!("| server | calls/s | p50 | p99 |\n|---|---:|---:|---:|");
    for kind in KINDS {
        let mut server = Command::new("taskset")
            .args(["-c", "0"])
            .arg(&me)
            .args(["serve", kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("taskset runs the server");
        let mut line = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            let _ = server.wait();
            println!("| {kind} | skipped: {} | | |", line.trim());
            continue;
        };
        let out = Command::new("taskset")
            .args(["-c", "1"])
            .arg(&me)
            .args(["client", kind, &addr, "--secs", &secs.to_string()])
            .args(["--callers", &callers.to_string()])
            .output()
            .expect("taskset runs the client");
        drop(server.stdin.take());
        let _ = server.wait();
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\n{callers} callers in flight, {secs} s per run; load average after: {load}");
}

/// A one-worker runtime (the process is pinned to one core).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// The echo: the same service, answering OK without deciding anything.
struct Echo;

#[tonic::async_trait]
impl RateLimitService for Echo {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let statuses = request
            .into_inner()
            .descriptors
            .iter()
            .map(|_| DescriptorStatus {
                code: Code::Ok as i32,
                ..DescriptorStatus::default()
            })
            .collect();
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses,
            ..RateLimitResponse::default()
        }))
    }
}

/// Serves `kind` on a free port; prints `listening on ADDR`; runs until
/// its stdin closes (then a Redis it started is stopped too).
fn serve(kind: &str) {
    let (closed, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = closed.send(());
    });
    runtime().block_on(async {
        tokio::select! {
            _ = serve_kind(kind) => {}
            _ = stdin_closed => {}
        }
    });
}

/// Serves `kind` (see [`serve`]).
async fn serve_kind(kind: &str) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    match kind {
        "rls" | "check" | "rls-redis" | "check-redis" => {
            drop(listener);
            let mut policy = POLICY.to_owned();
            // Kept while serving: its drop stops the server.
            let _redis = if kind.ends_with("-redis") {
                let Some(redis) = ratelimit_test_support::RedisServer::start() else {
                    println!("no redis-server");
                    return;
                };
                let url = redis.url();
                policy = format!("[store]\nkind = \"redis\"\nurl = \"{url}\"\n{policy}");
                Some(redis)
            } else {
                None
            };
            let state = State::new(&Config::parse(&policy, "bench", |_| None).unwrap()).unwrap();
            let options = tower_ratelimit::serve::ServeOptions::default();
            let running = Running::start(Arc::new(state), options).await.unwrap();
            let addr = if !kind.starts_with("check") {
                running.grpc_addr
            } else {
                running.http_addr
            };
            println!("listening on {addr}");
            std::future::pending::<()>().await;
        }
        "echo" => {
            println!("listening on {addr}");
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            tonic::transport::Server::builder()
                .add_service(RateLimitServiceServer::new(Echo))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        }
        _ => {
            println!("listening on {addr}");
            let app = axum::Router::new().route(
                "/check",
                axum::routing::get(|| async { http::StatusCode::NO_CONTENT }),
            );
            axum::serve(listener, app).await.unwrap();
        }
    }
}

/// `callers` loops calling `kind` at `addr` for `secs`: one table row.
fn client(kind: &str, addr: &str, secs: u64, callers: u64) {
    let mut latencies: Vec<u32> = runtime().block_on(async {
        let grpc = !kind.starts_with("check") && kind != "axum";
        let channel = if grpc {
            Some(
                RateLimitServiceClient::connect(format!("http://{addr}"))
                    .await
                    .unwrap(),
            )
        } else {
            None
        };
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<Bytes>>();
        let warm_until = Instant::now() + Duration::from_millis(500);
        let until = warm_until + Duration::from_secs(secs);
        let mut tasks = tokio::task::JoinSet::new();
        for caller in 0..callers {
            let (channel, http, addr) = (channel.clone(), http.clone(), addr.to_owned());
            tasks.spawn(async move {
                let mut out = Vec::new();
                let mut n = caller as u32;
                loop {
                    n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let ip = format!("10.0.{}.{}", (n % KEYS) / 256, (n % KEYS) % 256);
                    let start = Instant::now();
                    if start >= until {
                        return out;
                    }
                    match &channel {
                        Some(c) => rls_call(c.clone(), &ip).await,
                        None => check_call(&http, &addr, &ip).await,
                    }
                    if start >= warm_until {
                        out.push(start.elapsed().as_micros() as u32);
                    }
                }
            });
        }
        let mut all = Vec::new();
        while let Some(done) = tasks.join_next().await {
            all.extend(done.unwrap());
        }
        all
    });
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    let rate = latencies.len() as f64 / secs as f64;
    println!("| {kind} | {rate:.0} | {} µs | {} µs |", at(0.5), at(0.99));
}

async fn rls_call(mut client: RateLimitServiceClient<tonic::transport::Channel>, ip: &str) {
    let request = RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "remote_address".into(),
                value: ip.into(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    };
    let answer = client
        .should_rate_limit(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, Code::Ok as i32);
}

async fn check_call(
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Empty<Bytes>,
    >,
    addr: &str,
    ip: &str,
) {
    let request = http::Request::get(format!("http://{addr}/check?limit=bench"))
        .header("x-real-ip", ip)
        .body(Empty::new())
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 204);
    let _ = response.into_body().collect().await;
}
