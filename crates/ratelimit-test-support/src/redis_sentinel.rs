//! A private Sentinel per test: a master, a replica of it, and the server binary run with `--sentinel` monitoring them (quorum 1, down after 1 s), each on a free port; skipped like [`RedisServer`].

use crate::redis_cluster::cli;
use crate::redis_server::{free_port, pings, RedisServer};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The service the Sentinel monitors.
pub const SERVICE: &str = "ratelimit-it";

/// A master, its replica, and a Sentinel; all killed on drop.
///
/// ```no_run
/// use ratelimit_test_support::redis_sentinel::RedisSentinel;
///
/// let Some(sentinel) = RedisSentinel::start() else { return };
/// let url = sentinel.url(); // redis+sentinel://127.0.0.1:PORT/ratelimit-it
/// sentinel.fail_over();
/// # let _ = url;
/// ```
pub struct RedisSentinel {
    /// The master the Sentinel was started on.
    pub master: RedisServer,
    /// Its replica.
    pub replica: RedisServer,
    child: Child,
    /// The Sentinel's port.
    pub port: u16,
    dir: PathBuf,
}

impl RedisSentinel {
    /// The three processes, the replica in sync and known to the Sentinel
    /// (waited for up to 60 s); `None` without a server binary.
    pub fn start() -> Option<Self> {
        let master = RedisServer::start()?;
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()])?;
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "ratelimit-it-sentinel-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 10000\n",
                dir.display(),
                master.port
            ),
        )
        .expect("sentinel.conf");
        let child = Command::new(master.binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server binary with --sentinel");
        let me = Self {
            master,
            replica,
            child,
            port,
            dir,
        };
        me.wait_until(Duration::from_secs(10), "the sentinel answers", |s| {
            pings(s.port)
        });
        me.wait_until(
            Duration::from_secs(60),
            "the replica is in sync and known",
            |s| {
                let info = cli(s.replica.port, &["INFO", "replication"]).unwrap_or_default();
                info.contains("master_link_status:up") && s.replicas() == 1
            },
        );
        Some(me)
    }

    /// `redis+sentinel://127.0.0.1:PORT/SERVICE`.
    pub fn url(&self) -> String {
        format!("redis+sentinel://127.0.0.1:{}/{SERVICE}", self.port)
    }

    /// The master's port, as the Sentinel names it now (0 if it cannot
    /// tell).
    pub fn master_port(&self) -> u16 {
        cli(self.port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])
            .and_then(|out| out.lines().nth(1).and_then(|p| p.trim().parse().ok()))
            .unwrap_or(0)
    }

    /// How many replicas the Sentinel knows of.
    pub fn replicas(&self) -> usize {
        cli(self.port, &["SENTINEL", "REPLICAS", SERVICE])
            .map_or(0, |out| out.lines().filter(|l| l.trim() == "name").count())
    }

    /// Asks for a failover until the Sentinel starts one (it refuses
    /// until it has seen the replica in sync), then waits until the
    /// replica is the master; up to 60 s each.
    pub fn fail_over(&self) {
        self.wait_until(Duration::from_secs(60), "a failover starts", |s| {
            cli(s.port, &["SENTINEL", "FAILOVER", SERVICE]).is_some_and(|o| o.contains("OK"))
        });
        let new = self.replica.port;
        self.wait_until(Duration::from_secs(60), "the replica is the master", |s| {
            s.master_port() == new
        });
    }

    /// Waits until `ready`, panicking with `what` after `bound`.
    pub fn wait_until(&self, bound: Duration, what: &str, ready: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !ready(self) {
            assert!(start.elapsed() < bound, "{what}: not within {bound:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
