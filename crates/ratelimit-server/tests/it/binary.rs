//! The `ratelimitd` binary as a process: its file, its environment, both protocols, SIGTERM.

use crate::harness::{descriptor, request};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimit_test_support::spawned::{run_to_exit, Spawned};
use ratelimit_test_support::{DelayProxy, RedisServer};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// `text` in a file of its own under the temporary directory.
pub fn config_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ratelimitd-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const LIMITS: &str = r#"
[server]
grpc = "127.0.0.1:1"   # replaced by GRPC_BIND_ADDR
http = "127.0.0.1:1"   # replaced by BIND_ADDR

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "gcra 1/1h"
descriptors = [{ key = "remote_address" }]
"#;

pub fn ratelimitd(config: &PathBuf) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimitd"));
    cmd.env("RATELIMIT_CONFIG", config)
        .env("BIND_ADDR", "127.0.0.1:0")
        .env("GRPC_BIND_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "info");
    cmd
}

/// The gRPC address in `server`'s `listening on` line.
pub fn grpc_addr(server: &Spawned) -> String {
    let line = server
        .log
        .iter()
        .find(|l| l.contains("listening on"))
        .cloned()
        .unwrap();
    line.split("grpc=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no grpc= in {line:?}"))
        .to_owned()
}

/// SIGTERM, waited for on another thread (the client's connection answers
/// the server's GOAWAY on this runtime): the exit status and the server.
pub async fn terminate(mut server: Spawned) -> (std::process::ExitStatus, Spawned) {
    tokio::task::spawn_blocking(move || (server.terminate(), server))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_binary_serves_both_protocols_and_stops_on_sigterm() {
    let path = config_file("good.toml", LIMITS);
    let server = Spawned::start(ratelimitd(&path));
    let grpc = grpc_addr(&server);
    assert_eq!(
        server.status("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        200
    );
    let body = r#"{"limit":"per-ip","key":"10.3.0.1"}"#;
    let post = format!(
        "POST /check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(server.status(&post), 200);
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("gRPC connect");
    let answer = client
        .should_rate_limit(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.3.0.1")], None)],
            0,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, Code::OverLimit as i32);
    let (status, server) = terminate(server).await;
    drop(client);
    assert!(status.success(), "{status:?}: {:#?}", server.log);
    assert!(
        server.log.iter().any(|l| l.contains("ratelimitd stopped")),
        "{:#?}",
        server.log
    );
}

#[test]
fn a_bad_file_stops_the_binary_naming_the_file_the_line_and_the_limit() {
    let path = config_file("bad.toml", &LIMITS.replace("gcra 1/1h", "gcra 1/1hour"));
    let (status, stderr) = run_to_exit(ratelimitd(&path));
    assert_eq!(status.code(), Some(2), "{stderr}");
    let want = format!(
        "{}:6: limit \"per-ip\": algorithm = \"gcra 1/1hour\"",
        path.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
}

#[test]
fn configuration_errors_exit_2_and_a_failure_to_listen_exits_1() {
    let path = config_file("codes.toml", LIMITS);
    let vars = [
        ("REDIS_URL", "nowhere://x"),
        ("BIND_ADDR", "nowhere"),
        ("RATELIMIT_MAX_KEYS", "many"),
        ("RATELIMIT_CONFIG", "/nonexistent/ratelimitd.toml"),
    ];
    for (var, value) in vars {
        let mut cmd = ratelimitd(&path);
        cmd.env(var, value);
        let (status, stderr) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{var}={value}: {stderr}");
        assert!(stderr.contains("ratelimitd: "), "{var}: {stderr}");
    }
    let mut cmd = ratelimitd(&path);
    cmd.arg("--colour");
    let (status, stderr) = run_to_exit(cmd);
    assert_eq!(status.code(), Some(2), "{stderr}");
    // The address is taken: a runtime failure.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cmd = ratelimitd(&path);
    cmd.env("BIND_ADDR", taken.local_addr().unwrap().to_string());
    let (status, stderr) = run_to_exit(cmd);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
}

#[tokio::test]
async fn sigterm_lets_a_call_in_flight_finish() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // Each Redis round trip takes at least 300 ms (within the store's 1 s
    // connect timeout).
    let proxy = DelayProxy::start(redis.port, Duration::from_millis(150));
    let store = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"20s\"\n",
        proxy.url()
    );
    let path = config_file("drain.toml", &format!("{store}{LIMITS}"));
    let server = Spawned::start(ratelimitd(&path));
    let client = RateLimitServiceClient::connect(format!("http://{}", grpc_addr(&server)))
        .await
        .expect("gRPC connect");
    let call = || {
        let mut client = client.clone();
        async move {
            let ip = descriptor(&[("remote_address", "10.3.0.2")], None);
            client.should_rate_limit(request("edge", vec![ip], 0)).await
        }
    };
    // The first call connects to Redis; the second is waiting on Redis
    // when the signal comes: its script has reached the proxy, and its
    // answer is at least 150 ms away. (Nothing else of ratelimitd's writes
    // to Redis meanwhile: without a fallback it announces no instance.)
    call().await.expect("first call");
    let sent = proxy.upstream_chunks();
    let in_flight = tokio::spawn(call());
    let waited = std::time::Instant::now();
    while proxy.upstream_chunks() == sent {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "no call to Redis"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (status, server) = terminate(server).await;
    let answer = in_flight.await.unwrap().expect("answered, not dropped");
    assert_eq!(answer.into_inner().overall_code, Code::OverLimit as i32);
    assert!(status.success(), "{status:?}: {:#?}", server.log);
}

/// `POST /check` of `per-ip` for `key` on the binary: the status.
fn check_ip(server: &Spawned, key: &str) -> u16 {
    let body = format!(r#"{{"limit":"per-ip","key":"{key}"}}"#);
    server.status(&format!(
        "POST /check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ))
}

fn hangup(server: &Spawned) {
    let sent = Command::new("kill")
        .args(["-HUP", &server.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -HUP failed");
}

#[test]
fn sighup_reloads_the_file_keeping_used_quota_and_refuses_a_bad_one() {
    let path = config_file("hup.toml", LIMITS);
    let mut server = Spawned::start(ratelimitd(&path));
    assert_eq!(check_ip(&server, "10.3.0.9"), 200);
    assert_eq!(check_ip(&server, "10.3.0.9"), 429);
    // 1 used of 1, then of 3: 2 left.
    std::fs::write(&path, LIMITS.replace("gcra 1/1h", "gcra 3/1h")).unwrap();
    hangup(&server);
    let line = server.wait_for("configuration reloaded", Duration::from_secs(20));
    assert!(line.is_some(), "{:#?}", server.log);
    assert_eq!(check_ip(&server, "10.3.0.9"), 200);
    assert_eq!(check_ip(&server, "10.3.0.9"), 200);
    assert_eq!(check_ip(&server, "10.3.0.9"), 429);
    // A bad file: logged naming the file, the line and the limit; the
    // running limits stay (3 used of 3).
    std::fs::write(&path, LIMITS.replace("gcra 1/1h", "gcra 3/1hour")).unwrap();
    hangup(&server);
    let line = server
        .wait_for("configuration not reloaded", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{:#?}", server.log));
    let want = format!("{}:6: limit \"per-ip\": algorithm", path.display());
    assert!(line.contains(&want), "{line}");
    assert_eq!(check_ip(&server, "10.3.0.9"), 429);
    assert_eq!(check_ip(&server, "10.3.0.10"), 200);
    let status = server.terminate();
    assert!(status.success(), "{status:?}: {:#?}", server.log);
}

/// The status of `GET path` on `addr`, with `headers` (raw HTTP/1.1), and the body.
fn get(addr: &str, path: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("an answer");
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

/// The address logged as `field=Some(ADDR)` in the `listening on` line.
fn logged_addr(server: &Spawned, field: &str) -> String {
    let line = server
        .log
        .iter()
        .find(|l| l.contains("listening on"))
        .unwrap();
    let rest = line
        .split(&format!("{field}=Some("))
        .nth(1)
        .unwrap_or_else(|| panic!("no {field} in {line:?}"));
    rest[..rest.find(')').unwrap()].to_owned()
}

#[test]
fn metrics_and_admin_listen_where_the_environment_says() {
    let path = config_file("ops.toml", LIMITS);
    let token = "binary-admin-token-0123456789";
    let mut cmd = ratelimitd(&path);
    cmd.env("METRICS_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .env("ADMIN_TOKEN", token);
    let mut server = Spawned::start(cmd);
    let line = server
        .wait_for("configuration in force", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{:#?}", server.log));
    assert!(
        line.contains("memory, at most 1000000 keys per limit"),
        "{line}"
    );
    assert!(line.contains("proxies=none"), "{line}");
    assert!(!line.contains(token), "{line}");
    // A descriptor no limit matches: admitted, and logged by its keys.
    let body =
        r#"{"domain":"elsewhere","descriptors":[[{"key":"api_key","value":"secret-value-1"}]]}"#;
    let post = format!(
        "POST /check HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(server.status(&post), 200);
    let line = server
        .wait_for("matches no limit", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("{:#?}", server.log));
    assert!(
        line.contains("elsewhere") && line.contains("api_key"),
        "{line}"
    );
    assert!(!line.contains("secret-value-1"), "{line}");
    assert_eq!(check_ip(&server, "10.3.0.20"), 200);
    let (status, body) = get(&logged_addr(&server, "metrics"), "/metrics", "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(
            r#"ratelimitd_decisions_total{limit="per-ip",domain="edge",code="admitted"} 1"#
        ),
        "{body}"
    );
    let admin = logged_addr(&server, "admin");
    assert_eq!(get(&admin, "/limits", "").0, 401);
    let auth = format!("Authorization: Bearer {token}\r\n");
    let (status, body) = get(&admin, "/limits/per-ip/keys/10.3.0.20", &auth);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"remaining\":0"), "{body}");
}
