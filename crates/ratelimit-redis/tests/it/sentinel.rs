//! `redis+sentinel://` (feature `sentinel`): a master, a replica and a
//! `redis-server --sentinel` monitoring them, each on a free port. Two
//! stores share exact limits through the Sentinel's master, and through a
//! failover (`SENTINEL FAILOVER`) no check fails (the fallback decides
//! meanwhile), and the limits are exact again on the new master.

use crate::harness::Client as _;
use crate::harness::RedisServer;
use crate::topology::{admitted_alternately, load, until};
use ratelimit_core::{Gcra, Store};
use ratelimit_redis::{RedisStore, StoreState, Target};
use ratelimit_test_support::redis_server::{free_port, pings};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The service the Sentinel monitors.
const SERVICE: &str = "ratelimit-it";

/// A `redis-server --sentinel` on a free port, killed on drop.
struct Sentinel {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Sentinel {
    /// Monitoring `master` (quorum 1, down after 1 s), run by its binary.
    fn start(master: &RedisServer) -> Self {
        let master_port = master.port;
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "ratelimit-it-sentinel-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 10000\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new(master.binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server binary with --sentinel");
        let me = Self { child, port, dir };
        let start = Instant::now();
        while !pings(port) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "sentinel never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        me
    }

    async fn client(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// The master's port, as the Sentinel names it now.
    async fn master_port(&self) -> u16 {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SERVICE)
            .query_async(&mut self.client().await)
            .await
            .unwrap();
        port
    }

    /// How many replicas the Sentinel knows of.
    async fn replicas(&self) -> usize {
        let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(SERVICE)
            .query_async(&mut self.client().await)
            .await
            .unwrap();
        replicas.len()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn store(url: &str) -> RedisStore {
    RedisStore::builder(
        Target::parse(url, None).unwrap(),
        Gcra::new(10, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_secs(1))
    .fallback_to_memory(10_000)
    .build()
    .unwrap()
}

/// Whether `store`'s checks reach the server `on` now: a check of a fresh
/// key leaves its state there.
async fn decides_on(store: &RedisStore, on: &RedisServer, probe: &str) -> bool {
    let d = Store::<str>::check(store, probe, 1, 0).await;
    assert!(d.is_ok(), "a check failed: {d:?}");
    let exists: bool = redis::cmd("EXISTS")
        .arg(store.redis_key(probe))
        .query_async(&mut on.client().await)
        .await
        .unwrap_or(false);
    exists && store.state() == StoreState::Redis
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_through_a_sentinel_failover() {
    through_a_failover(How::Command).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_when_the_sentinels_master_is_killed() {
    through_a_failover(How::Kill).await;
}

/// How the failover comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `SENTINEL FAILOVER`, the old master alive.
    Command,
    /// The master killed (SIGKILL), the Sentinel finding it down.
    Kill,
}

async fn through_a_failover(how: How) {
    let Some(mut master) = RedisServer::start() else {
        return;
    };
    let port = master.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]).unwrap();
    let sentinel = Sentinel::start(&master);
    let url = format!("redis+sentinel://127.0.0.1:{}/{SERVICE}", sentinel.port);
    let (a, b) = (store(&url), store(&url));
    // Two instances share the limit exactly through the Sentinel's master.
    assert_eq!(admitted_alternately(&a, &b, "before", 30).await, 10);
    assert!(decides_on(&a, &master, "probe-a").await);
    let watch = &sentinel;
    let synced = &replica;
    // The Sentinel learns of the replica from the master (every 10 s).
    until(
        Duration::from_secs(60),
        "the replica is known and in sync",
        || async move {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut synced.client().await)
                .await
                .unwrap_or_default();
            info.contains("master_link_status:up") && watch.replicas().await == 1
        },
    )
    .await;
    let loading = load(vec![a.clone(), b.clone()], "during");
    match how {
        // Refused (NOGOODSLAVE) until the Sentinel has seen the replica
        // in sync: asked again until it starts.
        How::Command => {
            until(
                Duration::from_secs(60),
                "the sentinel starts a failover",
                || async move {
                    redis::cmd("SENTINEL")
                        .arg("FAILOVER")
                        .arg(SERVICE)
                        .query_async::<()>(&mut watch.client().await)
                        .await
                        .is_ok()
                },
            )
            .await
        }
        How::Kill => master.kill(),
    }
    let failover = Instant::now();
    let new_port = replica.port;
    until(
        Duration::from_secs(60),
        "the replica is the master",
        || async move { watch.master_port().await == new_port },
    )
    .await;
    let switched = failover.elapsed();
    // Both stores reconnect through the Sentinel to the new master.
    let mut n = 0;
    until(
        Duration::from_secs(60),
        "both stores decide on the new master",
        || {
            n += 1;
            let (a, b, replica) = (&a, &b, &replica);
            async move {
                decides_on(a, replica, &format!("probe-a-{n}")).await
                    && decides_on(b, replica, &format!("probe-b-{n}")).await
            }
        },
    )
    .await;
    let back = failover.elapsed();
    let (checks, errors) = loading.stop().await;
    assert_eq!(errors, 0, "checks failed during the failover");
    assert!(checks > 0);
    eprintln!(
        "sentinel failover ({how:?}): new master named after {switched:?}, both stores deciding on it after {back:?} ({checks} checks under load, none failed)"
    );
    assert_eq!(admitted_alternately(&a, &b, "after", 30).await, 10);
}
