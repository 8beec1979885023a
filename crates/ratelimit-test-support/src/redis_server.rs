//! A private server per test: a free port, a temp dir, no persistence;
//! killed on drop. The binary is `RATELIMIT_TEST_SERVER`'s (a path, or a
//! name looked up in `PATH`), `redis-server` by default: a
//! `valkey-server` runs the same tests.
//!
//! The one harness of the workspace (std only): used by the integration
//! tests, the examples' tests and `ratelimit-redis`'s and
//! `ratelimit-async`'s tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server ([`server_binary`]), killed (and its temp dir
/// removed) on drop.
///
/// ```no_run
/// use ratelimit_test_support::RedisServer;
///
/// // None, said loudly, where no server binary is installed.
/// let Some(server) = RedisServer::start() else { return };
/// let url = server.url(); // redis://127.0.0.1:PORT/
/// # let _ = url;
/// ```
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    extra: Vec<String>,
}

/// The environment variable naming the server binary the tests start
/// (single servers, Cluster nodes, Sentinels and TLS servers alike).
pub const SERVER_VAR: &str = "RATELIMIT_TEST_SERVER";

/// The server binary's name as configured: [`SERVER_VAR`]'s value, or
/// `redis-server`.
pub fn server_name() -> String {
    std::env::var(SERVER_VAR).unwrap_or_else(|_| "redis-server".to_owned())
}

/// The server binary the tests start: [`server_name`] as a path when it
/// has a `/`, else looked up in `PATH` (and `/usr/bin`); `None` if there
/// is no such file.
pub fn server_binary() -> Option<PathBuf> {
    let name = PathBuf::from(server_name());
    if name.components().count() > 1 {
        return Some(name).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// Writes `why` to stderr in a banner no one misses: the test harness
/// captures `eprintln!` of passing tests, and a skip must be seen.
pub fn skip_loudly(why: &str) {
    let bar = "!".repeat(why.len() + 8);
    let _ = writeln!(std::io::stderr(), "\n{bar}\n!!! {why} !!!\n{bar}\n");
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// Whether a PING on `port` gets +PONG.
pub fn pings(port: u16) -> bool {
    let addr = ([127, 0, 0, 1], port).into();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl RedisServer {
    /// A fresh server, or `None` (with a loud message) when there is no
    /// [`server_binary`]; with `CI=true` that is a failure instead.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// Like [`start`](Self::start), with extra server options.
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        let Some(bin) = server_binary() else {
            let name = server_name();
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "{name} not found, and CI=true: install the redis-server package, \
                     or set {SERVER_VAR} to a server binary"
                );
            }
            skip_loudly(&format!(
                "SKIPPED: {name} not found (apt-get install redis-server, or set {SERVER_VAR})"
            ));
            return None;
        };
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("ratelimit-it-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let mut server = Self {
                child: None,
                port,
                dir,
                bin: bin.clone(),
                extra: extra.iter().map(|s| s.to_string()).collect(),
            };
            if server.spawn() {
                return Some(server);
            }
        }
        panic!("could not start {}", bin.display());
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new(&self.bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.extra)
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if pings(self.port) {
                return true;
            }
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return false; // exited: the port was taken
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// The binary it runs ([`server_binary`]): a Sentinel runs it too.
    pub fn binary(&self) -> &Path {
        &self.bin
    }

    /// `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (STOP, CONT) to the server: a stopped server accepts
    /// connections but never answers.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {pid} failed");
    }

    /// A new, empty server on the same port (after [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
        }
        panic!(
            "could not restart {} on port {}",
            self.bin.display(),
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
