//! A private `redis-server` per test: a free port, a temp dir, no
//! persistence; killed on drop.
//!
//! The one harness of the workspace (std only): used by the integration
//! tests, the examples' tests and `ratelimit-redis`'s and
//! `ratelimit-async`'s tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed (and its temp dir removed) on drop.
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    extra: Vec<String>,
}

fn find_binary() -> Option<PathBuf> {
    // REDIS_SERVER_BIN overrides the search (a missing file: no server).
    if let Some(p) = std::env::var_os("REDIS_SERVER_BIN") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let fixed = PathBuf::from("/usr/bin/redis-server");
    if fixed.exists() {
        return Some(fixed);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("redis-server"))
            .find(|p| p.exists())
    })
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
    /// `redis-server` binary; with `CI=true` that is a failure instead.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// Like [`start`](Self::start), with extra server options.
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        let Some(bin) = find_binary() else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("redis-server not found, and CI=true: install the redis-server package");
            }
            // Written to stderr directly: the test harness captures
            // eprintln! of passing tests, and this must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !!! SKIPPED: redis-server not found (apt-get install redis-server) !!!\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
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
        panic!("could not start redis-server");
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
            .expect("spawn redis-server");
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
        panic!("could not restart redis-server on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
