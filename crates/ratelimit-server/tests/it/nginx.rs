//! A real nginx (`/usr/sbin/nginx`) running `examples/nginx/nginx.conf`
//! (its ports replaced by free ones) in front of a tiny app, asking a
//! ratelimitd of `examples/nginx/ratelimitd.toml` through `auth_request`.
//! Without nginx the test is skipped, loudly; under `CI=true` it fails.

use crate::harness::{call, http_client, Harness};
use ratelimit_test_support::redis_server::free_port;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The example's folder.
fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx")
}

/// nginx, or `None` after saying why the test is skipped (a failure
/// under `CI=true`).
fn nginx_or_skip(test: &str) -> Option<PathBuf> {
    let found = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
        .map(PathBuf::from)
        .into_iter()
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: nginx is not installed (CI installs the Debian package `nginx`)"
        );
        eprintln!("SKIPPED {test}: nginx is not installed (apt-get install nginx)");
    }
    found
}

/// A running nginx (one process, `master_process off`), killed on drop.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Nginx {
    /// nginx of the example's files, copied to a new directory with its
    /// listening port, ratelimitd's and the app's replaced.
    fn start(binary: &Path, ratelimitd: SocketAddr, app: SocketAddr) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "ratelimitd-nginx-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        for entry in std::fs::read_dir(example_dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "conf") {
                let text = std::fs::read_to_string(&path)
                    .unwrap()
                    .replace("127.0.0.1:8080", &addr.to_string())
                    .replace("127.0.0.1:8081", &ratelimitd.to_string())
                    .replace("127.0.0.1:3000", &app.to_string())
                    // A busy test machine may be slower than the example allows.
                    .replace("_timeout 1s;", "_timeout 30s;");
                std::fs::write(dir.join(path.file_name().unwrap()), text).unwrap();
            }
        }
        let child = Command::new(binary)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            // One process: killing it leaves no worker behind.
            .args(["-g", "master_process off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let mut nginx = Self {
            child,
            addr,
            dir: dir.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            let exited = nginx.child.try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "nginx did not listen ({exited:?}): {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The app behind nginx: 200 "app" on every path.
async fn app() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().fallback(|| async { "app\n" });
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_auth_request_limits_a_route_at_exactly_its_limit() {
    let Some(binary) = nginx_or_skip("nginx_auth_request_limits_a_route_at_exactly_its_limit")
    else {
        return;
    };
    let policy = std::fs::read_to_string(example_dir().join("ratelimitd.toml")).unwrap();
    let h = Harness::start(&policy).await;
    let nginx = Nginx::start(&binary, h.running.http_addr, app().await);
    let client = http_client();
    let send = |method: &'static str, path: &str| {
        let uri = format!("http://{}{path}", nginx.addr);
        let client = &client;
        let body = if method == "POST" { "{}" } else { "" };
        async move { call(client, method, &uri, &[], body).await }
    };
    // Limit "api": 5 a minute per address; 5 of 8 pass. A POST's check
    // is a GET too (`proxy_method GET`).
    for i in 0..8 {
        let method = if i % 2 == 0 { "GET" } else { "POST" };
        let a = send(method, "/api/items").await;
        if i < 5 {
            assert_eq!(a.status, 200, "request {i}: {}", a.body);
            assert_eq!(a.body, "app\n");
            assert_eq!(a.headers["ratelimit-policy"], "\"api\";q=5;w=60");
            let state = a.headers["ratelimit"].to_str().unwrap();
            assert!(
                state.starts_with(&format!("\"api\";r={};t=", 4 - i)),
                "{state}"
            );
        } else {
            assert_eq!(a.status, 429, "request {i}: {}", a.body);
            assert!(a.body.contains("rate limited"), "{}", a.body);
            let retry: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry), "{retry}");
            let state = a.headers["ratelimit"].to_str().unwrap();
            assert!(state.starts_with("\"api\";r=0;t="), "{state}");
        }
    }
    // Another route's limit counts apart; an unlimited route passes.
    assert_eq!(send("GET", "/login").await.status, 200);
    assert_eq!(send("GET", "/").await.status, 200);
    drop(nginx);
    h.running.stop().await;
}
