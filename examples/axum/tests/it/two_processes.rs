//! Two `axum-example` processes sharing one Redis (`REDIS_URL`) admit the
//! configured limits together, and stay up (no 5xx) when Redis dies; the
//! same on a Cluster of 3 masters and 3 replicas through a master kill;
//! and one process on `rediss://` with a private CA (`REDIS_TLS_CA`).
//!
//! Plain HTTP/1.1 over `std::net::TcpStream`; the client IPs vary through
//! `X-Forwarded-For`, the test being the trusted proxy (127.0.0.1).

use ratelimit_test_support::redis_cluster::{cli, RedisCluster};
use ratelimit_test_support::redis_sentinel::RedisSentinel;
use ratelimit_test_support::redis_server::{free_port, RedisServer};
use ratelimit_test_support::tls::{tls_server, Pki};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `axum-example`, killed on drop.
struct App {
    child: Child,
    addr: SocketAddr,
}

impl App {
    fn start(redis_url: &str) -> Self {
        Self::start_with(redis_url, &[])
    }

    /// With more settings (`REDIS_TLS_CA`, ...).
    fn start_with(redis_url: &str, envs: &[(&str, &str)]) -> Self {
        for _ in 0..5 {
            let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let mut child = Command::new(env!("CARGO_BIN_EXE_axum-example"))
                .env("RATELIMIT_CONFIG", crate::patient_redis_config())
                .envs(envs.iter().copied())
                .env("BIND_ADDR", addr.to_string())
                .env("REDIS_URL", redis_url)
                .env("TRUSTED_PROXIES", "127.0.0.1/32")
                .env("API_KEYS", "warm-0,warm-1,k")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn axum-example");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: try another
                }
                if TcpStream::connect(addr).is_ok() {
                    return Self { child, addr };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("axum-example did not start");
    }

    /// Sends a request; the status code.
    fn send(&self, method: &str, path: &str, headers: &str, body: &str) -> u16 {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("a response");
        let text = String::from_utf8_lossy(&out);
        text.get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"))
    }

    /// `GET /ready`: its status and JSON body.
    fn ready(&self) -> (u16, serde_json::Value) {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status: u16 = out[9..12].parse().unwrap();
        let body = out.split_once("\r\n\r\n").unwrap().1.to_owned();
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
        (status, v)
    }

    /// How many instances this app counts for `limit` (`GET /ready`).
    fn instances(&self, limit: &str) -> u64 {
        instances_in(&self.ready().1, limit)
    }

    /// Kills the process; what it wrote to stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

/// How many instances `GET /ready`'s body `ready` counts for `limit`.
pub(crate) fn instances_in(ready: &serde_json::Value, limit: &str) -> u64 {
    ready["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["limit"] == limit)
        .and_then(|s| s["instances"].as_u64())
        .unwrap_or_else(|| panic!("{limit} not in {ready}"))
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` requests at once, alternately to each app: the statuses.
fn concurrently(apps: &[App; 2], n: usize, req: (&str, &str, &str, &str)) -> Vec<u16> {
    let (method, path, headers, body) = req;
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|i| s.spawn(move || apps[i % 2].send(method, path, headers, body)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

fn count(codes: &[u16], status: u16) -> usize {
    codes.iter().filter(|&&c| c == status).count()
}

const BAD_LOGIN: &str = r#"{"username":"alice","password":"guess"}"#;
const GOOD_LOGIN: &str = r#"{"username":"alice","password":"open sesame"}"#;

#[test]
fn two_processes_on_one_redis_admit_exactly_the_limits() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let apps = [App::start(&redis.url()), App::start(&redis.url())];

    // Connect every limit of both processes first (the stores connect on
    // first use, and a first check slower than 50 ms decides in memory).
    for (i, app) in apps.iter().enumerate() {
        let ip = format!("X-Forwarded-For: 198.18.0.{i}\r\n");
        assert_eq!(app.send("POST", "/accounts", &ip, ""), 201);
        assert_eq!(app.send("POST", "/login", &ip, GOOD_LOGIN), 200);
        assert_eq!(app.send("GET", "/api/items", &ip, ""), 200);
        let warm = format!("X-API-Key: warm-{i}\r\n");
        assert_eq!(app.send("GET", "/api/items", &warm, ""), 200);
        let user = format!("Authorization: Bearer warm-{i}\r\n");
        assert_eq!(app.send("POST", "/tickets", &user, ""), 201);
    }

    // POST /accounts: 2 per client IP across both processes.
    let ip = "X-Forwarded-For: 203.0.113.7\r\n";
    let codes = concurrently(&apps, 16, ("POST", "/accounts", ip, ""));
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
    assert_eq!(count(&codes, 429), 14, "{codes:?}");

    // POST /tickets: 1 per user.
    let user = "Authorization: Bearer carol\r\n";
    let codes = concurrently(&apps, 8, ("POST", "/tickets", user, ""));
    assert_eq!(count(&codes, 201), 1, "{codes:?}");
    assert_eq!(count(&codes, 429), 7, "{codes:?}");

    // A token longer than 64 bytes is stored hashed; both processes hash
    // it with the secret they share through Redis, so it is one user.
    let long = format!("Authorization: Bearer {}\r\n", "t".repeat(200));
    let codes = concurrently(&apps, 8, ("POST", "/tickets", &long, ""));
    assert_eq!(count(&codes, 201), 1, "{codes:?}");
    assert_eq!(count(&codes, 429), 7, "{codes:?}");

    // POST /login: exactly 5 failures reach the password check.
    let codes = concurrently(&apps, 20, ("POST", "/login", ip, BAD_LOGIN));
    assert_eq!(count(&codes, 401), 5, "{codes:?}");
    assert_eq!(count(&codes, 429), 15, "{codes:?}");
    for app in &apps {
        assert_eq!(app.send("POST", "/login", ip, GOOD_LOGIN), 429);
    }

    // GET /api/items without a key: 10 per client IP.
    let codes = concurrently(&apps, 24, ("GET", "/api/items", ip, ""));
    assert_eq!(count(&codes, 200), 10, "{codes:?}");
    assert_eq!(count(&codes, 429), 14, "{codes:?}");

    // Each counts both (announced through Redis every second).
    let deadline = Instant::now() + Duration::from_secs(20);
    while apps.iter().any(|a| a.instances("accounts") != 2) {
        assert!(
            Instant::now() < deadline,
            "the apps did not count each other"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Redis dies: both processes stay up, fail open to their own
    // in-memory limits (each its share: 1 of the 2 accounts), and never
    // answer 5xx.
    redis.kill();
    let fresh = "X-Forwarded-For: 203.0.113.8\r\n";
    for app in &apps {
        assert_eq!(app.send("POST", "/accounts", fresh, ""), 201);
        assert_eq!(app.send("POST", "/accounts", fresh, ""), 429);
    }
    for req in [
        ("POST", "/accounts", ip, ""),
        ("POST", "/tickets", user, ""),
        ("POST", "/login", fresh, BAD_LOGIN),
        ("GET", "/api/items", fresh, ""),
        ("GET", "/api/items", "X-API-Key: k\r\n", ""),
        ("GET", "/health", "", ""),
    ] {
        // 16: keys denied before the outage are answered by each store's
        // deny cache without touching Redis, so the fresh keys alone must
        // bring a store's breaker to its threshold.
        let codes = concurrently(&apps, 16, req);
        assert!(codes.iter().all(|&c| c < 500), "{req:?}: {codes:?}");
    }

    // The outage is in the logs (on by default, at info): each process's
    // circuit breaker opened.
    let [a, b] = apps;
    for err in [a.stop(), b.stop()] {
        assert!(err.contains("limits in Redis"), "{err}");
        assert!(err.contains("secret shared in Redis"), "{err}");
        assert!(err.contains(" WARN "), "{err}");
        assert!(err.contains("circuit breaker opened"), "{err}");
    }
}

/// Redis answers OOM to every script (maxmemory 1, noeviction): the app
/// decides in memory instead, so at most 5 wrong logins per client IP
/// reach the password check, and the failure is logged a few times, not
/// once per request.
#[test]
fn redis_out_of_memory_keeps_the_login_limit() {
    let Some(redis) =
        RedisServer::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"])
    else {
        return;
    };
    let apps = [App::start(&redis.url()), App::start(&redis.url())];
    let ip = "X-Forwarded-For: 203.0.113.9\r\n";
    // Each process on its own in memory: 5 each, never more.
    for app in &apps {
        let codes: Vec<u16> = (0..50)
            .map(|_| app.send("POST", "/login", ip, BAD_LOGIN))
            .collect();
        assert_eq!(count(&codes, 401), 5, "{codes:?}");
        assert_eq!(count(&codes, 429), 45, "{codes:?}");
    }
    let [a, b] = apps;
    for err in [a.stop(), b.stop()] {
        assert!(err.to_lowercase().contains("oom"), "{err}");
        let warnings = err.lines().filter(|l| l.contains(" WARN ")).count();
        assert!(
            (1..=10).contains(&warnings),
            "{warnings} warnings for 50 requests:\n{err}"
        );
    }
}

/// `GET /ready` names each limit's store state: `redis` while Redis
/// answers, `fallback` once it is gone (the breaker open), and stays 200
/// throughout, since the example's stores fall back to memory.
#[test]
fn ready_reports_each_store_state() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let app = App::start(&redis.url());
    let ready = App::ready;
    let states = |v: &serde_json::Value| -> Vec<String> {
        v["stores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, v) = ready(&app);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "ready");
    assert!(
        states(&v).len() >= 5 && states(&v).iter().all(|s| s == "redis"),
        "{v}"
    );
    redis.kill();
    // Failures open each store's breaker (5 in a row); the login limits'
    // stores see them.
    let ip = "X-Forwarded-For: 203.0.113.50\r\n";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(app.send("POST", "/login", ip, BAD_LOGIN) < 500);
        let (status, v) = ready(&app);
        assert_eq!(status, 200, "{v}");
        if states(&v).iter().any(|s| s == "fallback") {
            eprintln!("after Redis died: {v}");
            break;
        }
        assert!(Instant::now() < deadline, "no store in fallback: {v}");
    }
}

/// Connects every limit of each app (the stores connect on first use).
fn warm(apps: &[App; 2]) {
    for (i, app) in apps.iter().enumerate() {
        let ip = format!("X-Forwarded-For: 198.18.0.{i}\r\n");
        assert_eq!(app.send("POST", "/accounts", &ip, ""), 201);
        assert_eq!(app.send("POST", "/login", &ip, GOOD_LOGIN), 200);
        assert_eq!(app.send("GET", "/api/items", &ip, ""), 200);
    }
}

#[test]
fn two_processes_on_a_cluster_hold_the_limits_through_a_master_kill() {
    let Some(mut cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let apps = [App::start(&cluster.url()), App::start(&cluster.url())];
    warm(&apps);
    // POST /accounts: 2 per client IP across both processes.
    let ip = "X-Forwarded-For: 203.0.113.7\r\n";
    let codes = concurrently(&apps, 16, ("POST", "/accounts", ip, ""));
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
    // One account each from 48 addresses (each in a /24 of its own), then
    // kill the master holding the most of them: those are the keys the
    // kill touches.
    let ips: Vec<String> = (1..=48).map(|n| format!("198.51.{n}.7")).collect();
    for (i, ip) in ips.iter().enumerate() {
        let header = format!("X-Forwarded-For: {ip}\r\n");
        assert_eq!(apps[i % 2].send("POST", "/accounts", &header, ""), 201);
    }
    let on = |i: usize| cluster.keys_on(i, "ratelimit:accounts:*");
    let victim = (0..cluster.nodes.len())
        .filter(|&i| cluster.is_master(i))
        .max_by_key(|&i| on(i).len())
        .unwrap();
    let held = on(victim);
    let hit: Vec<&String> = ips
        .iter()
        .filter(|ip| held.iter().any(|k| k.contains(&format!("{{{ip}"))))
        .collect();
    assert!(hit.len() >= 4, "{} of the keys on the master", hit.len());
    // Replication is asynchronous: give it a moment before the kill.
    std::thread::sleep(Duration::from_secs(1));
    let (during, after) = hit.split_at(hit.len() / 2);
    cluster.kill(victim);
    let killed = Instant::now();
    // Requests keep being answered, never 5xx, until a replica took over.
    let mut rounds = 0;
    while !(cluster.ok() && cluster.masters() == 3) {
        assert!(killed.elapsed() < Duration::from_secs(60), "no failover");
        for ip in during {
            let header = format!("X-Forwarded-For: {ip}\r\n");
            let codes = concurrently(&apps, 4, ("POST", "/accounts", &header, ""));
            assert!(codes.iter().all(|&c| c < 500), "{codes:?}");
        }
        rounds += 1;
    }
    assert!(rounds > 0);
    // Back in the cluster: each address that made one account makes
    // exactly one more across both processes. (Until both reconnect, a
    // round may be decided in memory; the next address then tries.)
    let exact = after.iter().any(|ip| {
        let header = format!("X-Forwarded-For: {ip}\r\n");
        std::thread::sleep(Duration::from_secs(1));
        let codes = concurrently(&apps, 16, ("POST", "/accounts", &header, ""));
        assert!(codes.iter().all(|&c| c < 500), "{codes:?}");
        count(&codes, 201) == 1
    });
    assert!(
        exact,
        "no exact round within {:?} of the kill",
        killed.elapsed()
    );
    eprintln!(
        "cluster master kill: exact again within {:?}",
        killed.elapsed()
    );
    let fresh = "X-Forwarded-For: 203.0.113.9\r\n";
    let codes = concurrently(&apps, 16, ("POST", "/accounts", fresh, ""));
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
}

#[test]
fn one_process_over_tls_with_a_private_ca() {
    let pki = Pki::new("axum");
    let Some((redis, tls_port)) = tls_server(&pki) else {
        return;
    };
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    let ca = pki.ca.display().to_string();
    let app = App::start_with(&url, &[("REDIS_TLS_CA", &ca)]);
    let ip = "X-Forwarded-For: 203.0.113.7\r\n";
    let codes: Vec<u16> = (0..3)
        .map(|_| app.send("POST", "/accounts", ip, ""))
        .collect();
    assert_eq!(codes, [201, 201, 429]);
    // Decided in this Redis, over TLS (the keys read through its plain port).
    let keys = cli(redis.port, &["--scan", "--pattern", "ratelimit:accounts:*"]).unwrap();
    assert!(keys.contains("203.0.113.7"), "{keys}");
    let err = app.stop();
    assert!(
        err.contains(&format!("redis=rediss://127.0.0.1:{tls_port}/0")),
        "{err}"
    );
}

/// Two processes through Sentinel (`redis+sentinel://`): exact limits
/// across both, no 5xx through a failover, and exact again on the new
/// master.
#[test]
fn two_processes_through_sentinel_hold_the_limits_through_a_failover() {
    let Some(sentinel) = RedisSentinel::start() else {
        return;
    };
    let apps = [App::start(&sentinel.url()), App::start(&sentinel.url())];
    warm(&apps);
    let ip = "X-Forwarded-For: 203.0.113.7\r\n";
    let codes = concurrently(&apps, 16, ("POST", "/accounts", ip, ""));
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
    // One account each from 16 addresses, then a failover.
    let ips: Vec<String> = (1..=16).map(|n| format!("198.51.{n}.9")).collect();
    for (i, ip) in ips.iter().enumerate() {
        let header = format!("X-Forwarded-For: {ip}\r\n");
        assert_eq!(apps[i % 2].send("POST", "/accounts", &header, ""), 201);
    }
    // Replication is asynchronous: give it a moment before the failover.
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    // Requests go on during the failover, never answered 5xx.
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            sentinel.fail_over();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let during = "X-Forwarded-For: 203.0.113.99\r\n";
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let codes = concurrently(&apps, 4, ("POST", "/login", during, BAD_LOGIN));
            assert!(codes.iter().all(|&c| c < 500), "{codes:?}");
        }
    });
    // Every address that made one account makes exactly one more across
    // both processes once they decide on the new master; never a 5xx.
    let exact = ips.iter().any(|ip| {
        let header = format!("X-Forwarded-For: {ip}\r\n");
        std::thread::sleep(Duration::from_secs(1));
        let codes = concurrently(&apps, 16, ("POST", "/accounts", &header, ""));
        assert!(codes.iter().all(|&c| c < 500), "{codes:?}");
        count(&codes, 201) == 1
    });
    assert!(exact, "no exact round within {:?}", started.elapsed());
    eprintln!(
        "sentinel failover: exact again within {:?}",
        started.elapsed()
    );
    let fresh = "X-Forwarded-For: 203.0.113.9\r\n";
    let codes = concurrently(&apps, 16, ("POST", "/accounts", fresh, ""));
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
}
