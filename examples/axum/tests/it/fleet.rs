//! Admin changes across a fleet: two `axum-example` processes on one Redis,
//! each with its admin API. A reset, an unban, a ban, a list entry (with
//! its ttl) and an override made through A show on B's public routes
//! within 300 ms of A's reply (B's deny cache and leases are told through
//! Redis pub/sub, the run-time entries through the shared copy); a ban
//! while 64 clients hammer the key admits nothing sent after the ban's
//! reply (with leases on, nothing on A, and on B at most what its leases
//! held until the ban's publication reached it); and a SIGHUP reload
//! keeps every admin change.
//!
//! Plain HTTP/1.1 over `std::net::TcpStream`; client IPs through
//! `X-Forwarded-For`, the test being the trusted proxy.

use ratelimit_test_support::redis_server::{free_port, RedisServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "fleet-admin-token-0123456789";
/// The longest B may take to show A's change, from A's reply.
const AT_ONCE: Duration = Duration::from_millis(300);
const GOOD_LOGIN: &str = r#"{"username":"alice","password":"open sesame"}"#;

/// A running `axum-example` with its admin API, killed on drop.
struct App {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl App {
    /// An app on `redis_url`, its stderr (the logs) to the file `log` if
    /// any.
    fn start(redis_url: &str, envs: &[(&str, &str)], log: Option<&Path>) -> Self {
        for _ in 0..5 {
            let stderr = match log {
                Some(path) => Stdio::from(std::fs::File::create(path).expect("a log file")),
                None => Stdio::null(),
            };
            let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let admin: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let mut child = Command::new(env!("CARGO_BIN_EXE_axum-example"))
                .env("RATELIMIT_CONFIG", crate::patient_redis_config())
                .envs(envs.iter().copied())
                .env("BIND_ADDR", addr.to_string())
                .env("ADMIN_ADDR", admin.to_string())
                .env("ADMIN_TOKEN", TOKEN)
                .env("REDIS_URL", redis_url)
                .env("TRUSTED_PROXIES", "127.0.0.1/32")
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("spawn axum-example");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // a port was taken: try others
                }
                if TcpStream::connect(addr).is_ok() && TcpStream::connect(admin).is_ok() {
                    return Self { child, addr, admin };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("axum-example did not start");
    }

    /// A public request from `ip`: its status.
    fn public(&self, method: &str, path: &str, ip: &str, body: &str) -> u16 {
        let headers = format!("X-Forwarded-For: {ip}\r\nContent-Type: application/json\r\n");
        http(self.addr, method, path, &headers, body).0
    }

    /// `POST /accounts` from `ip`.
    fn account(&self, ip: &str) -> u16 {
        self.public("POST", "/accounts", ip, "")
    }

    /// An admin request: its status and body, and when the reply was read.
    fn admin(&self, method: &str, path: &str, body: &str) -> (u16, String, Instant) {
        let headers =
            format!("Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n");
        let (status, text) = http(self.admin, method, path, &headers, body);
        (status, text, Instant::now())
    }

    /// An admin request that must succeed: when its reply was read.
    fn must(&self, method: &str, path: &str, body: &str) -> Instant {
        let (status, text, at) = self.admin(method, path, body);
        assert_eq!(status, 200, "{method} {path}: {text}");
        at
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("a response");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    (status, text)
}

/// Two apps on one fresh redis-server (`None`: no redis-server, skipped
/// loudly unless CI=true).
fn fleet() -> Option<(RedisServer, [App; 2])> {
    fleet_with(&[])
}

/// [`fleet`] with more settings.
fn fleet_with(envs: &[(&str, &str)]) -> Option<(RedisServer, [App; 2])> {
    let server = RedisServer::start()?;
    let apps = fleet_on(&server, envs, [None, None]);
    Some((server, apps))
}

/// Two apps on `server`, each logging to its file of `logs` if any, once
/// both are subscribed.
fn fleet_on(server: &RedisServer, envs: &[(&str, &str)], logs: [Option<&Path>; 2]) -> [App; 2] {
    let apps = logs.map(|log| App::start(&server.url(), envs, log));
    // Both subscribed: the channels of the limits the tests use, and the
    // entries'.
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let channels = [
        "ratelimit:accounts:invalidate",
        "ratelimit:login-failures:invalidate",
        "ratelimit:entries",
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    for channel in channels {
        loop {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query(&mut c)
                .unwrap();
            if counts.first().is_some_and(|(_, n)| *n >= 2) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{channel}: not subscribed by both"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    apps
}

/// How long after `since` `probe` first gives `want`, polled for up to 5 s.
fn first(since: Instant, want: u16, probe: impl FnMut() -> u16) -> Option<Duration> {
    first_within(Duration::from_secs(5), since, want, probe)
}

/// [`first`], polled for up to `bound`.
fn first_within(
    bound: Duration,
    since: Instant,
    want: u16,
    mut probe: impl FnMut() -> u16,
) -> Option<Duration> {
    let mut last = 0;
    while since.elapsed() < bound {
        last = probe();
        if last == want {
            return Some(since.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("never {want} within {bound:?}: the last answer was {last}");
    None
}

/// Asserts that `took` is within [`AT_ONCE`], reporting the figure.
fn at_once(what: &str, took: Option<Duration>) {
    eprintln!("{what}: shown on the other instance after {took:?}");
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{what}: {took:?}");
}

/// Uses up `ip`'s 2 accounts a day on `app`: its next one is 429, twice
/// (the second from B's deny cache).
fn exhaust(app: &App, ip: &str) {
    assert_eq!(app.account(ip), 201);
    assert_eq!(app.account(ip), 201);
    assert_eq!(app.account(ip), 429);
    assert_eq!(app.account(ip), 429);
}

#[test]
fn a_reset_and_unban_on_a_show_at_once_on_b() {
    let Some((_server, [a, b])) = fleet() else {
        return;
    };
    // Reset.
    exhaust(&b, "198.51.100.1");
    let at = a.must("DELETE", "/limits/accounts/keys/198.51.100.1", "");
    at_once("reset", first(at, 201, || b.account("198.51.100.1")));
    // Unban.
    a.must(
        "PUT",
        "/limits/accounts/bans/198.51.100.2",
        r#"{"for": "1h"}"#,
    );
    assert_eq!(b.account("198.51.100.2"), 429);
    assert_eq!(b.account("198.51.100.2"), 429);
    let at = a.must("DELETE", "/limits/accounts/bans/198.51.100.2", "");
    at_once("unban", first(at, 201, || b.account("198.51.100.2")));
}

/// A ban on A denies at once on B, leases on (`RATELIMIT_LEASE`), while B
/// admits the IP's successful logins (never counted). (That a ban takes
/// away a lease B holds is tested on the stores: ratelimit-redis,
/// `tests/it/invalidation.rs`.)
#[test]
fn a_ban_on_a_denies_at_once_on_b_despite_its_lease() {
    let Some((_server, [a, b])) = fleet_with(&[("RATELIMIT_LEASE", "4")]) else {
        return;
    };
    let login = || b.public("POST", "/login", "198.51.100.3", GOOD_LOGIN);
    for _ in 0..3 {
        assert_eq!(login(), 200);
    }
    let at = a.must(
        "PUT",
        "/limits/login-failures/bans/198.51.100.3",
        r#"{"for": "1h"}"#,
    );
    at_once("ban", first(at, 429, login));
}

#[test]
fn list_entries_and_overrides_on_a_show_at_once_on_b() {
    let Some((_server, [a, b])) = fleet() else {
        return;
    };
    // A deny entry for 2 s: 403 on B at once, then gone on both. (A
    // request B admitted before the entry reached it consumes quota: the
    // entry's end is probed with an address B has not seen. Its 2 s run
    // from Redis's write, after `sent`.)
    assert_eq!(b.account("192.0.2.10"), 201);
    let sent = Instant::now();
    let at = a.must("PUT", "/deny/192.0.2.0%2F24", r#"{"ttl": "2s"}"#);
    at_once("deny entry", first(at, 403, || b.account("192.0.2.10")));
    assert_eq!(a.account("192.0.2.10"), 403);
    let gone = first_within(Duration::from_secs(20), sent, 201, || {
        b.account("192.0.2.12")
    });
    assert!(
        gone.is_some_and(|t| t >= Duration::from_secs(2)),
        "{gone:?}"
    );
    assert_eq!(a.account("192.0.2.11"), 201);
    // An allow entry for 2 s: a key at its limit passes on B, then not.
    exhaust(&b, "192.0.2.20");
    let sent = Instant::now();
    let at = a.must("PUT", "/allow/192.0.2.20", r#"{"ttl": "2s"}"#);
    at_once("allow entry", first(at, 201, || b.account("192.0.2.20")));
    let back = first_within(Duration::from_secs(20), sent, 429, || {
        b.account("192.0.2.20")
    });
    assert!(
        back.is_some_and(|t| t >= Duration::from_secs(2)),
        "{back:?}"
    );
    assert_eq!(a.account("192.0.2.20"), 429);
    // A deny entry removed on A: gone on B at once.
    a.must("PUT", "/deny/192.0.2.30", r#"{"ttl": "1h"}"#);
    assert!(first(Instant::now(), 403, || b.account("192.0.2.30")).is_some());
    let at = a.must("DELETE", "/deny/192.0.2.30", "");
    at_once(
        "deny entry removed",
        first(at, 201, || b.account("192.0.2.30")),
    );
    // An override: a key at its limit gets 10 a day on B, then 2 again.
    exhaust(&b, "192.0.2.40");
    let at = a.must(
        "PUT",
        "/limits/accounts/overrides/192.0.2.40",
        r#"{"algorithm": "sliding-log 10/1d"}"#,
    );
    at_once("override", first(at, 201, || b.account("192.0.2.40")));
    let at = a.must("DELETE", "/limits/accounts/overrides/192.0.2.40", "");
    at_once(
        "override removed",
        first(at, 429, || b.account("192.0.2.40")),
    );
}

/// What each client saw: when it sent a request, to which app (0: A),
/// and the status.
type Seen = (Instant, usize, u16);

/// The shipped policy file with login limits that 64 clients logging in
/// successfully never reach (the shipped one, 5 reserved per hour, bans
/// the IP itself within milliseconds), and no `reset-on` (a reset per
/// login would drop every lease): only the admin's ban denies. Written
/// to a file of its own for `test`.
fn hammer_policy(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("axum-fleet-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ratelimit.toml");
    let text = axum_example::DEFAULT_POLICY
        .replace("sliding-log 5/1h", "fixed-window 1000000/1h")
        .replace("sliding-log 100/1h", "fixed-window 1000000/1h")
        .replace("reset-on = [200]\n", "");
    assert!(text.contains("fixed-window 1000000/1h") && !text.contains("reset-on = [200]"));
    std::fs::write(&path, text).unwrap();
    path
}

/// 64 clients log in (successfully) from one IP, 32 on each instance,
/// while A bans it; every request until 1.2 s after the ban's reply
/// (beyond a deny cache's second and a lease's).
fn hammer_while_a_bans(apps: &[App; 2], ip: &str) -> (Instant, Vec<Seen>) {
    // One hammer at a time: two would starve the machine's cores.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let stop_at = std::sync::OnceLock::<Instant>::new();
    let banned_at = std::sync::OnceLock::<(u16, String, Instant)>::new();
    let results: Vec<Vec<Seen>> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..64)
            .map(|i| {
                let (app, stop_at) = (&apps[i % 2], &stop_at);
                s.spawn(move || {
                    let mut seen = Vec::new();
                    while stop_at.get().is_none_or(|t| Instant::now() < *t) {
                        let sent = Instant::now();
                        seen.push((sent, i % 2, app.public("POST", "/login", ip, GOOD_LOGIN)));
                    }
                    seen
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let path = format!("/limits/login-failures/bans/{ip}");
        // Under this load Redis may miss the store's 50 ms timeout (503):
        // the ban is made again; the reply counted is the one that says so.
        let mut reply = apps[0].admin("PUT", &path, r#"{"for": "1h"}"#);
        for _ in 0..50 {
            if reply.0 != 503 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            reply = apps[0].admin("PUT", &path, r#"{"for": "1h"}"#);
        }
        // Set whatever the reply, so that the clients stop.
        stop_at.set(reply.2 + Duration::from_millis(1_200)).unwrap();
        banned_at.set(reply).unwrap();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let (status, text, at) = banned_at.into_inner().unwrap();
    assert_eq!(status, 200, "the ban: {text}");
    (at, results.into_iter().flatten().collect())
}

/// Of the requests to `app` sent in `(from, to]`: how many, how many
/// admitted (200), and every other status.
fn tally(all: &[Seen], app: usize, from: Instant, to: Instant) -> (usize, usize, Vec<u16>) {
    let of: Vec<u16> = all
        .iter()
        .filter(|s| s.1 == app && s.0 > from && s.0 <= to)
        .map(|s| s.2)
        .collect();
    let admitted = of.iter().filter(|&&c| c == 200).count();
    let other = of
        .iter()
        .copied()
        .filter(|&c| c != 200 && c != 429)
        .collect();
    (of.len(), admitted, other)
}

/// What `hammer_while_a_bans` saw after the ban's reply, counted exactly:
/// A admits nothing sent after it (Redis has the ban, and A has dropped
/// its deny-cache entry and lease); B admits at most `b_soon` sent within
/// 300 ms (before the ban's publication reaches it: units of its leases,
/// or its in-memory fallback answering a check Redis did not answer in
/// time), and nothing sent later (it has the publication: its deny
/// cache, leases and fallback all know the ban).
fn assert_after_ban(all: &[Seen], at: Instant, b_soon: usize) {
    let far = at + Duration::from_secs(3600);
    let before = |app| {
        tally(
            all,
            app,
            at - Duration::from_secs(60),
            at - Duration::from_millis(200),
        )
    };
    let (before_a, before_b) = (before(0), before(1));
    let on_a = tally(all, 0, at, far);
    let on_b_soon = tally(all, 1, at, at + AT_ONCE);
    let on_b_late = tally(all, 1, at + AT_ONCE, far);
    eprintln!(
        "(sent, admitted, other statuses) before the ban: A {before_a:?}, B {before_b:?}; after \
         its reply: A {on_a:?}, B within 300 ms {on_b_soon:?}, B later {on_b_late:?}"
    );
    for seen in [&before_a, &before_b] {
        assert!(seen.1 > 0 && seen.2.is_empty(), "before the ban: {seen:?}");
    }
    assert!(on_a.0 > 0 && on_b_late.0 > 0, "too few requests");
    assert!(on_a.2.is_empty() && on_b_soon.2.is_empty() && on_b_late.2.is_empty());
    assert_eq!(on_a.1, 0, "admitted on A after its ban's reply");
    assert!(on_b_soon.1 <= b_soon, "{on_b_soon:?}");
    assert_eq!(on_b_late.1, 0, "admitted on B after it had the ban");
}

/// Without leases: B, before the publication, may answer only from its
/// fallback, at most once per client in flight (a check that times out
/// takes 50 ms; the publication arrives within a few).
#[test]
fn a_ban_while_64_clients_hammer_the_key() {
    let policy = hammer_policy("no-lease");
    let config = policy.to_str().unwrap();
    let Some((_server, apps)) = fleet_with(&[("RATELIMIT_CONFIG", config)]) else {
        return;
    };
    let (at, all) = hammer_while_a_bans(&apps, "203.0.113.5");
    assert_after_ban(&all, at, 32);
    let _ = std::fs::remove_dir_all(policy.parent().unwrap());
}

/// With leases of 4 (`RATELIMIT_LEASE`): B, before the publication, also
/// what its lease held or was being taken then (3 units for the held
/// lease and for each of its 32 clients' takes in flight).
#[test]
fn a_ban_while_64_clients_hammer_the_key_with_leases() {
    let policy = hammer_policy("lease");
    let config = policy.to_str().unwrap();
    let envs = [("RATELIMIT_CONFIG", config), ("RATELIMIT_LEASE", "4")];
    let Some((_server, apps)) = fleet_with(&envs) else {
        return;
    };
    let (at, all) = hammer_while_a_bans(&apps, "203.0.113.6");
    assert_after_ban(&all, at, 3 * 33 + 32);
    let _ = std::fs::remove_dir_all(policy.parent().unwrap());
}

/// Admin changes survive a SIGHUP reload: the ban, the list entry and
/// the override hold after the reload was applied.
#[test]
fn a_sighup_reload_keeps_every_admin_change() {
    let Some((_server, [a, _b])) = fleet() else {
        return;
    };
    exhaust(&a, "198.51.100.50");
    a.must(
        "PUT",
        "/limits/accounts/overrides/198.51.100.50",
        r#"{"algorithm": "sliding-log 10/1d"}"#,
    );
    a.must("PUT", "/deny/198.51.100.60", r#"{"ttl": "1h"}"#);
    a.must(
        "PUT",
        "/limits/accounts/bans/198.51.100.70",
        r#"{"for": "1h"}"#,
    );
    let reloads = |app: &App| -> u64 {
        let (_, body, _) = app.admin("GET", "/limits", "");
        let json = &body[body.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["reloads"].as_u64().unwrap()
    };
    let before = reloads(&a);
    let killed = Command::new("kill")
        .arg("-HUP")
        .arg(a.child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while reloads(&a) == before {
        assert!(Instant::now() < deadline, "no reload after SIGHUP");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(a.account("198.51.100.50"), 201, "the override");
    assert_eq!(a.account("198.51.100.60"), 403, "the deny entry");
    assert_eq!(a.account("198.51.100.70"), 429, "the ban");
}

/// What Redis sent on one raw connection after `command` (`MONITOR`:
/// every command it runs, a script's included; `PSUBSCRIBE *`: every
/// message published), read until dropped.
struct Capture {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reader: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Capture {
    fn start(port: u16, command: &str) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis");
        s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        // Its first reply: the command took effect.
        let mut first = [0u8; 64];
        let n = s.read(&mut first).expect("a reply");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let reader = std::thread::spawn(move || {
            let mut all = first[..n].to_vec();
            let mut buf = [0u8; 16_384];
            while !flag.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                    Err(_) => {} // the read timeout: check the flag
                }
            }
            all
        });
        Self {
            stop,
            reader: Some(reader),
        }
    }

    /// Everything read, as text.
    fn text(mut self) -> String {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let bytes = self.reader.take().unwrap().join().unwrap();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Every key name in `c`'s Redis, and the text of every value of those
/// of a plain type (strings, hashes' fields and values, lists, sets,
/// sorted sets' members).
fn everything_stored(c: &mut redis::Connection) -> String {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    let mut all = String::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(c).unwrap();
        let values: Vec<String> = match kind.as_str() {
            "string" => vec![redis::cmd("GET").arg(&key).query(c).unwrap()],
            "hash" => redis::cmd("HGETALL").arg(&key).query(c).unwrap(),
            "list" => redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(c)
                .unwrap(),
            "set" => redis::cmd("SMEMBERS").arg(&key).query(c).unwrap(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(c)
                .unwrap(),
            other => panic!("{key}: a {other}, not read"),
        };
        all.push_str(&format!("{key} ({kind}): {}\n", values.join(" ")));
    }
    all
}

/// An override, an allow entry and a deny entry for API keys set through
/// A apply on B at once, while neither Redis's keys and values, nor any
/// command Redis ran (`MONITOR`), nor any message published, nor either
/// app's logs hold the keys' text: the entries rest and travel as
/// digests.
#[test]
fn api_key_entries_rest_in_redis_as_digests_and_apply_on_b() {
    const KEY1: &str = "sk-fleet-0123456789abcdef";
    const KEY2: &str = "sk-fleet-fedcba9876543210";
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("axum-fleet-{}-secret", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let logs = [dir.join("a.log"), dir.join("b.log")];
    let monitor = Capture::start(server.port, "MONITOR");
    let published = Capture::start(server.port, "PSUBSCRIBE *");
    let keys = format!("{KEY1},{KEY2}");
    let envs = [("API_KEYS", keys.as_str()), ("RUST_LOG", "info")];
    let [a, b] = fleet_on(&server, &envs, [Some(&logs[0]), Some(&logs[1])]);
    let items = |app: &App, key: &str| {
        let headers = format!("X-API-Key: {key}\r\n");
        http(app.addr, "GET", "/api/items", &headers, "").0
    };
    assert_eq!(items(&b, KEY1), 200);
    // An override of 1 a day: B refuses KEY1's next request, then A too.
    let at = a.must(
        "PUT",
        &format!("/limits/api-key/overrides/{KEY1}"),
        r#"{"algorithm": "fixed-window 1/1d"}"#,
    );
    at_once("API key override", first(at, 429, || items(&b, KEY1)));
    assert_eq!(items(&a, KEY1), 429);
    assert_eq!(items(&b, KEY2), 200, "another key keeps its limit");
    // Allowed: KEY1 passes again on both.
    let at = a.must("PUT", &format!("/allow/{KEY1}"), r#"{"ttl": "1h"}"#);
    at_once("API key allow entry", first(at, 200, || items(&b, KEY1)));
    assert_eq!(items(&a, KEY1), 200);
    // Denied: 403 for KEY2 on both.
    let at = a.must("PUT", &format!("/deny/{KEY2}"), r#"{"ttl": "1h"}"#);
    at_once("API key deny entry", first(at, 403, || items(&b, KEY2)));
    assert_eq!(items(&a, KEY2), 403);
    // At rest: digests only.
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let stored = everything_stored(&mut c);
    for table in ["allow", "deny", "overrides"] {
        let hash = format!("ratelimit:{{entries}}:{table}");
        let fields: Vec<String> = redis::cmd("HKEYS").arg(&hash).query(&mut c).unwrap();
        assert_eq!(fields.len(), 1, "{hash}: {fields:?}");
        let digest = fields[0].rsplit('\n').next().unwrap();
        assert!(
            digest.len() == 33 && digest.starts_with('#'),
            "{hash}: {fields:?}"
        );
    }
    drop((a, b));
    let (commands, messages) = (monitor.text(), published.text());
    assert!(commands.contains("HSET") && messages.contains("changed"));
    let logged: Vec<String> = logs
        .iter()
        .map(|l| std::fs::read_to_string(l).unwrap())
        .collect();
    assert!(logged[0].contains("admin: override set"), "{}", logged[0]);
    let places = [
        ("stored", &stored),
        ("a command", &commands),
        ("a message", &messages),
        ("A's log", &logged[0]),
        ("B's log", &logged[1]),
    ];
    for (place, text) in places {
        assert!(!text.contains("sk-fleet"), "an API key in {place}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many instances `app` counts for `limit` (`GET /ready`).
fn instances(app: &App, limit: &str) -> u64 {
    let (_, text) = http(app.addr, "GET", "/ready", "", "");
    let v: serde_json::Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..])
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    crate::two_processes::instances_in(&v, limit)
}

/// Redis paused (SIGSTOP) under two apps that counted each other, and
/// five reloads of the accounts limit on both (its period moved back and
/// forth, and once to the same settings): 2 accounts through Redis, then
/// each app's fallback admits its share (1 of 2), carried over through
/// every reload: at most 4 accounts for the IP in all, where a fallback
/// started afresh at each reload admitted 2 per app each time.
#[test]
fn five_reloads_while_redis_is_paused_leave_at_most_four_accounts_per_ip() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("axum-fleet-{}-outage", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("ratelimit.toml");
    let write = |algorithm: &str| {
        let text = axum_example::DEFAULT_POLICY.replace(
            "algorithm = \"sliding-log 2/1d\"\nkey = \"client-ip\"\n",
            &format!("algorithm = \"{algorithm}\"\nkey = \"client-ip\"\n"),
        );
        assert!(text.contains(algorithm));
        std::fs::write(&policy, text).unwrap();
    };
    write("sliding-log 2/1d");
    let logs = [dir.join("a.log"), dir.join("b.log")];
    let envs = [("RATELIMIT_CONFIG", policy.to_str().unwrap())];
    let apps = fleet_on(&server, &envs, [Some(&logs[0]), Some(&logs[1])]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while apps.iter().any(|a| instances(a, "accounts") != 2) {
        assert!(
            Instant::now() < deadline,
            "the apps did not count each other"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ip = "203.0.113.80";
    let mut created = 0;
    for app in [&apps[0], &apps[1], &apps[0]] {
        created += usize::from(app.account(ip) == 201);
    }
    assert_eq!(created, 2, "through redis");
    server.signal("STOP");
    let changed = |log: &Path| {
        let text = std::fs::read_to_string(log).unwrap();
        text.lines()
            .filter(|l| l.contains("rate limit changed") && l.contains("limit=accounts "))
            .count()
    };
    let mut changes = 0;
    let mut last = "sliding-log 2/1d";
    for setting in [
        "sliding-log 2/2d",
        "sliding-log 2/1d",
        "sliding-log 2/1d",
        "sliding-log 2/2d",
        "sliding-log 2/1d",
    ] {
        write(setting);
        for app in &apps {
            let hup = Command::new("kill")
                .arg("-HUP")
                .arg(app.child.id().to_string())
                .status();
            assert!(hup.unwrap().success());
        }
        if setting != last {
            changes += 1;
            let deadline = Instant::now() + Duration::from_secs(10);
            while logs.iter().any(|l| changed(l) < changes) {
                assert!(Instant::now() < deadline, "reload {changes} not applied");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        last = setting;
        for app in [&apps[0], &apps[1], &apps[0], &apps[1]] {
            let status = app.account(ip);
            assert!(status == 201 || status == 429, "{status}");
            created += usize::from(status == 201);
        }
    }
    server.signal("CONT");
    assert!(created <= 4, "{created} accounts for one IP");
    assert_eq!(created, 4, "each fallback admitted its share");
    drop(apps);
    let _ = std::fs::remove_dir_all(&dir);
}
