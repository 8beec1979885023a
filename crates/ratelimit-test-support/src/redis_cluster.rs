//! A private Redis Cluster per test: `redis-server --cluster-enabled` nodes
//! on free ports (node timeout 1 s), joined by `redis-cli --cluster
//! create`, each killed on drop; skipped like [`RedisServer`].

use crate::redis_server::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

/// The nodes of a running Cluster, masters first as `redis-cli` made them.
///
/// ```no_run
/// use ratelimit_test_support::RedisCluster;
///
/// // None, said loudly, where redis-cli or the server is missing.
/// let Some(cluster) = RedisCluster::start(3, 1) else { return };
/// assert_eq!(cluster.masters(), 3);
/// let urls = cluster.url(); // comma-separated node URLs
/// # let _ = urls;
/// ```
pub struct RedisCluster {
    /// Every node (a killed one stays, dead).
    pub nodes: Vec<RedisServer>,
    killed: Vec<usize>,
}

/// `redis-cli -p PORT ARGS...`: its output, or `None` if it failed.
pub fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

impl RedisCluster {
    /// `masters * (1 + replicas)` nodes made one Cluster, every node
    /// `cluster_state:ok` and every replica in sync (waited for up to
    /// 60 s); `None` without a `redis-server` (see [`RedisServer::start`]).
    pub fn start(masters: usize, replicas: usize) -> Option<Self> {
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            nodes.push(RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "1000",
            ])?);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli (Debian package redis-tools)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let me = Self {
            nodes,
            killed: Vec::new(),
        };
        me.wait_until(
            Duration::from_secs(60),
            "every node ok, replicas in sync",
            |c| c.ok() && c.synced_replicas() == masters * replicas,
        );
        Some(me)
    }

    /// `redis://127.0.0.1:PORT/` of every node, comma-separated (a
    /// `REDIS_URL`).
    pub fn url(&self) -> String {
        let urls: Vec<String> = self.nodes.iter().map(RedisServer::url).collect();
        urls.join(",")
    }

    fn alive(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.killed.contains(i))
            .map(|(_, n)| n)
    }

    /// Whether every live node says `cluster_state:ok`.
    pub fn ok(&self) -> bool {
        self.alive().all(|n| {
            cli(n.port, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok"))
        })
    }

    /// The live nodes that are masters.
    pub fn masters(&self) -> usize {
        self.alive().filter(|n| is_master(n.port)).count()
    }

    fn synced_replicas(&self) -> usize {
        self.alive()
            .filter(|n| {
                cli(n.port, &["INFO", "replication"])
                    .is_some_and(|i| i.contains("master_link_status:up"))
            })
            .count()
    }

    /// Kills (SIGKILL) a live master holding at least one key; its index.
    pub fn kill_a_master(&mut self) -> usize {
        let victim = (0..self.nodes.len())
            .find(|&i| {
                let port = self.nodes[i].port;
                !self.killed.contains(&i)
                    && is_master(port)
                    && cli(port, &["DBSIZE"]).is_some_and(|n| n.trim() != "0")
            })
            .expect("a master holding keys");
        self.nodes[victim].kill();
        self.killed.push(victim);
        victim
    }

    /// Kills (SIGKILL) node `i`.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
        self.killed.push(i);
    }

    /// Whether live node `i` is a master.
    pub fn is_master(&self, i: usize) -> bool {
        !self.killed.contains(&i) && is_master(self.nodes[i].port)
    }

    /// The keys node `i` holds that match `pattern` (`SCAN MATCH`).
    pub fn keys_on(&self, i: usize, pattern: &str) -> Vec<String> {
        cli(self.nodes[i].port, &["--scan", "--pattern", pattern])
            .map(|out| out.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Waits until `ready` holds, polling every 50 ms; panics naming
    /// `what` after `bound`.
    pub fn wait_until(&self, bound: Duration, what: &str, ready: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !ready(self) {
            assert!(start.elapsed() < bound, "not within {bound:?}: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn is_master(port: u16) -> bool {
    cli(port, &["INFO", "replication"]).is_some_and(|i| i.contains("role:master"))
}
