//! A real nginx (the Debian package, `/usr/sbin/nginx`) in front of the
//! axum example app (its own router and accept loop, served in process on
//! loopback, trusting nginx at 127.0.0.1): a traffic pattern whose limited
//! counts are known in advance goes through nginx, each live answer is
//! recorded (429 and the limit its body or `RateLimit` field names), and
//! nginx's access log, replayed through `examples/axum/ratelimit.toml`
//! with `--trusted-proxies 127.0.0.1`, must give the same decision for
//! every request and the same limited count per limit.
//!
//! Two runs: clients without `X-Forwarded-For`, logged in nginx's
//! `combined` format (the client is then nginx's peer, 127.0.0.1, live and
//! in the replay); and clients behind a proxy of their own, each sending
//! `X-Forwarded-For`, logged with `"$http_x_forwarded_for"` and
//! `$request_time` appended. Without nginx the test is skipped, loudly;
//! under `CI=true` it fails.

use super::temp_dir;
use ratelimit_test_support::redis_server::free_port;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// nginx's binary, if installed.
fn nginx_binary() -> Option<PathBuf> {
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nginx")).collect())
        .unwrap_or_default();
    std::iter::once(PathBuf::from("/usr/sbin/nginx"))
        .chain(on_path)
        .find(|p| p.is_file())
}

/// nginx, or `None` after saying why the test is skipped (a failure
/// under `CI=true`).
fn nginx_or_skip(test: &str) -> Option<PathBuf> {
    let found = nginx_binary();
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: nginx is not installed (CI installs the Debian package `nginx`)"
        );
        eprintln!("SKIPPED {test}: nginx is not installed (apt-get install nginx)");
    }
    found
}

/// The log format with the forwarding header and the request time.
const XFF_FORMAT: &str = "'$remote_addr - $remote_user [$time_local] \"$request\" $status \
    $body_bytes_sent \"$http_referer\" \"$http_user_agent\" \"$http_x_forwarded_for\" $request_time'";

/// A running nginx: one process (`master_process off`), killed on drop.
struct Nginx {
    child: Child,
    port: u16,
}

impl Nginx {
    /// Starts nginx in `dir` on a free port, proxying to `upstream` and
    /// logging to `combined.log` and `xff.log`.
    fn start(binary: &Path, dir: &Path, upstream: u16) -> Self {
        let port = free_port();
        let d = dir.display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 64; }}\nhttp {{\n\
             log_format xff {XFF_FORMAT};\n\
             access_log {d}/combined.log combined;\naccess_log {d}/xff.log xff;\n\
             client_body_temp_path {d}/body;\nproxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
             server {{\n listen 127.0.0.1:{port};\n lingering_close off;\n location / {{\n  proxy_pass http://127.0.0.1:{upstream};\n\
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n }}\n}}\n}}\n"
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let nginx = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nginx did not listen: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The axum example app on a free loopback port, trusting 127.0.0.1
/// (nginx) for `X-Forwarded-For`; stopped on drop.
struct App {
    runtime: tokio::runtime::Runtime,
    port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl App {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        // The shipped limits, trusting nginx on loopback, on a free port.
        let var = |v: &str| match v {
            "TRUSTED_PROXIES" => Some("127.0.0.1".to_owned()),
            "BIND_ADDR" => Some("127.0.0.1:0".to_owned()),
            _ => None,
        };
        let limits =
            tower_ratelimit::deploy::Limits::from_toml(axum_example::DEFAULT_POLICY, None, var)
                .expect("the shipped file loads");
        let app = axum_example::app_on(&limits, &axum_example::Config::default())
            .expect("the shipped file suits the app");
        let server = runtime.block_on(limits.bind(app)).expect("a free port");
        let port = server.local_addr().port();
        runtime.spawn(async move {
            let _limits = limits;
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            runtime,
            port,
            stop: Some(stop),
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.runtime
            .block_on(async { tokio::time::sleep(Duration::from_millis(10)).await });
    }
}

/// One request of the traffic: method, path, the client's
/// `X-Forwarded-For` (if it sends one), and a JSON body.
type Step = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);

const FAILED: Option<&str> = Some(r#"{"username":"ann","password":"guess"}"#);
const RIGHT: Option<&str> = Some(r#"{"username":"ann","password":"open sesame"}"#);

/// What the live app answered: the status, and the limit that refused.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    limit: Option<String>,
}

/// Sends `step` to nginx on `port` (one connection each, closed after).
fn send(port: u16, (method, path, xff, body): Step) -> Answer {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.unwrap_or("");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(xff) = xff {
        head.push_str(&format!("X-Forwarded-For: {xff}\r\n"));
    }
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    let mut res = String::new();
    s.read_to_string(&mut res).unwrap();
    let status = res[9..12].parse().expect("a status line");
    let named = |from: &str, prefix: &str| {
        let start = from.find(prefix)? + prefix.len();
        Some(from[start..].split('"').next()?.to_owned())
    };
    let limit = (status == 429)
        .then(|| {
            named(&res, "\"limit\":\"").or_else(|| named(&res.to_lowercase(), "\nratelimit: \""))
        })
        .flatten();
    Answer { status, limit }
}

/// Sends `traffic` through a fresh app behind a fresh nginx; returns the
/// answers and the directory holding nginx's logs.
fn live(binary: &Path, name: &str, traffic: &[Step]) -> (Vec<Answer>, PathBuf) {
    let dir = temp_dir(name);
    let app = App::start();
    let nginx = Nginx::start(binary, &dir, app.port);
    // One request at a time, each logged before the next is sent: the
    // log's order is the order the app decided in (nginx logs a request
    // when it frees it, which may come after its client has the answer).
    let mut answers = Vec::with_capacity(traffic.len());
    for (i, step) in traffic.iter().enumerate() {
        answers.push(send(nginx.port, *step));
        let deadline = Instant::now() + Duration::from_secs(10);
        for log in ["combined.log", "xff.log"] {
            loop {
                let text = std::fs::read_to_string(dir.join(log)).unwrap_or_default();
                if text.lines().count() > i {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{log}: request {} not logged",
                    i + 1
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    drop(nginx);
    drop(app);
    (answers, dir)
}

/// Replays `log` through the example's policy: each line's decision, and
/// the JSON report.
fn replay(log: &Path) -> (Vec<String>, serde_json::Value) {
    let decisions = log.with_extension("decisions");
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/axum/ratelimit.toml"
    );
    let out = super::ok(&[
        "--policy",
        policy,
        "--log",
        log.to_str().unwrap(),
        "--trusted-proxies",
        "127.0.0.1",
        "--app-key",
        "known-api-key=api-key",
        "--app-key",
        "anonymous-ip=client-ip",
        "--decisions",
        decisions.to_str().unwrap(),
        "--json",
    ]);
    let lines = std::fs::read_to_string(&decisions).unwrap();
    (
        lines.lines().map(str::to_owned).collect(),
        serde_json::from_str(&out).expect("--json is JSON"),
    )
}

/// The limit each decision names, `None` when admitted.
fn limited_by(decision: &str) -> Option<String> {
    let mut words = decision.split(' ').skip(2);
    (words.next() == Some("limited")).then(|| words.next().unwrap().to_owned())
}

/// Checks the replay of `log` against `answers`, request by request and
/// per limit, and that the live counts are `expected`.
fn same_decisions(answers: &[Answer], log: &Path, expected: &[(&str, u64)]) {
    let (decisions, report) = replay(log);
    assert_eq!(decisions.len(), answers.len(), "{decisions:?}");
    for (i, (answer, decision)) in answers.iter().zip(&decisions).enumerate() {
        assert!(
            answer.status != 429 || answer.limit.is_some(),
            "line {}: {answer:?}",
            i + 1
        );
        assert_eq!(
            limited_by(decision),
            answer.limit,
            "line {}: live {answer:?}, replayed {decision}",
            i + 1
        );
        assert!(
            decision.starts_with(&format!("{} {} ", i + 1, answer.status)),
            "{decision}"
        );
    }
    let mut live: BTreeMap<&str, u64> = BTreeMap::new();
    for a in answers {
        if let Some(l) = &a.limit {
            *live.entry(l).or_default() += 1;
        }
    }
    assert_eq!(
        live,
        expected.iter().copied().collect(),
        "the live app's limited counts"
    );
    for limit in report["limits"].as_array().unwrap() {
        let name = limit["name"].as_str().unwrap();
        let want = live.get(name).copied().unwrap_or(0);
        assert_eq!(limit["limited"], want, "limit {name}: {report:#}");
    }
}

/// Failed logins past the limit, accounts past the limit, the items API
/// past its anonymous limit (HEAD under GET), and an unlimited route.
fn traffic(xff: [Option<&'static str>; 6]) -> Vec<Step> {
    let [a, b, c, d, e, f] = xff;
    let mut t: Vec<Step> = Vec::new();
    t.extend([("POST", "/login", a, FAILED); 7]);
    t.push(("POST", "/login", a, RIGHT));
    t.extend([("POST", "/login", b, FAILED); 3]);
    t.push(("POST", "/login", b, RIGHT));
    t.extend([("POST", "/accounts", c, None); 3]);
    t.extend([("POST", "/accounts", d, None); 2]);
    t.extend([("GET", "/api/items", e, None); 12]);
    t.push(("HEAD", "/api/items", e, None));
    t.extend([("GET", "/api/items", f, None); 3]);
    t.extend([("GET", "/health", a, None); 3]);
    t
}

#[test]
fn nginx_combined_log_replays_as_the_app_decided() {
    let Some(nginx) = nginx_or_skip("nginx_combined_log_replays_as_the_app_decided") else {
        return;
    };
    // One client, nginx's peer: 12 logins (5 failures admitted, then
    // limited), 5 accounts (2 admitted), 16 items requests (10 admitted).
    let (answers, dir) = live(&nginx, "nginx-combined", &traffic([None; 6]));
    same_decisions(
        &answers,
        &dir.join("combined.log"),
        &[("accounts", 3), ("anonymous", 6), ("login-failures", 7)],
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn nginx_log_with_forwarded_for_replays_as_the_app_decided() {
    let Some(nginx) = nginx_or_skip("nginx_log_with_forwarded_for_replays_as_the_app_decided")
    else {
        return;
    };
    let clients = [
        Some("203.0.113.7"),
        Some("203.0.113.8"),
        Some("198.51.100.9"),
        Some("198.51.100.10"),
        Some("192.0.2.1, 198.51.100.7"),
        Some("198.51.100.8"),
    ];
    let (answers, dir) = live(&nginx, "nginx-xff", &traffic(clients));
    same_decisions(
        &answers,
        &dir.join("xff.log"),
        &[("accounts", 1), ("anonymous", 3), ("login-failures", 3)],
    );
    let _ = std::fs::remove_dir_all(dir);
}
