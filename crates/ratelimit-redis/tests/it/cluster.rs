//! A Redis Cluster (feature `cluster`): on three nodes, checks go to the
//! node owning each key's slot, and every key's limit holds; on three
//! masters and three replicas, two stores share exact limits, killing a
//! master under load fails no check (the fallback decides meanwhile), and
//! the limits are exact again once a replica has taken over.

use crate::harness::Client as _;
use crate::harness::RedisServer;
use crate::topology::{admitted_alternately, load, until};
use ratelimit_core::{FixedWindow, Gcra, Store};
use ratelimit_redis::{RedisStore, Target};
use std::process::Command;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_a_cluster() {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        match RedisServer::start_with(&["--cluster-enabled", "yes"]) {
            Some(s) => nodes.push(s),
            None => return,
        }
    }
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let status = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    // Wait until every node sees the cluster as ok.
    let start = Instant::now();
    for n in &nodes {
        let mut c = n.client().await;
        loop {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut c)
                .await
                .unwrap();
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "cluster never ok: {info}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let urls: Vec<String> = addrs.iter().map(|a| format!("redis://{a}/")).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let store = RedisStore::builder(
        client.clone(),
        Gcra::new(3, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    for k in 0..30 {
        let key = format!("user:{{{k}}}");
        let mut admitted = 0;
        for _ in 0..5 {
            if Store::<str>::check(&store, &key, 1, 0)
                .await
                .unwrap()
                .allowed
            {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3, "{key}");
    }
    // The keys are spread over the nodes.
    let mut holding = 0;
    for n in &nodes {
        let mut c = n.client().await;
        let size: u64 = redis::cmd("DBSIZE").query_async(&mut c).await.unwrap();
        holding += usize::from(size > 0);
    }
    assert!(holding >= 2, "all keys on one node");
    // Two limits in one script: their keys share the caller's key as hash
    // tag, so one slot (no CROSSSLOT), whatever node owns it.
    let group = RedisStore::builder(
        client,
        FixedWindow::new(4, Duration::from_secs(3600)).unwrap(),
    )
    .and_limit(Gcra::new(2, Duration::from_secs(3600)).unwrap())
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    for k in 0..30 {
        let key = format!("group:{k}");
        let mut admitted = 0;
        for _ in 0..4 {
            let d = Store::<str>::check(&group, &key, 1, 0).await.unwrap();
            admitted += u32::from(d.allowed);
        }
        assert_eq!(admitted, 2, "{key}");
    }
}

/// `n` cluster-enabled servers (node timeout 1 s) made one Cluster with
/// `replicas` replicas per master, every node ok and every replica in
/// sync; `None` to skip.
async fn cluster(n: usize, replicas: usize) -> Option<Vec<RedisServer>> {
    let mut nodes = Vec::new();
    for _ in 0..n {
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
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let all = &nodes;
    until(
        Duration::from_secs(60),
        "every node ok, every replica in sync",
        || async move {
            let mut synced = 0;
            for node in all {
                let Ok(info) = node_info(node, &["CLUSTER", "INFO"]).await else {
                    return false;
                };
                if !info.contains("cluster_state:ok") {
                    return false;
                }
                let repl = node_info(node, &["INFO", "replication"])
                    .await
                    .unwrap_or_default();
                synced += usize::from(repl.contains("master_link_status:up"));
            }
            synced == n / (replicas + 1) * replicas
        },
    )
    .await;
    Some(nodes)
}

/// A command's text reply from one node.
async fn node_info(node: &RedisServer, args: &[&str]) -> redis::RedisResult<String> {
    let client = redis::Client::open(node.url())?;
    let mut c = client.get_multiplexed_async_connection().await?;
    redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut c)
        .await
}

/// Whether `node` (alive) is a master.
async fn is_master(node: &RedisServer) -> bool {
    node_info(node, &["INFO", "replication"])
        .await
        .is_ok_and(|i| i.contains("role:master"))
}

/// Whether a check of `key` on `store` was decided in the Cluster: its
/// state is there afterwards.
async fn decided_in(
    store: &RedisStore,
    key: &str,
    cluster: &mut ratelimit_redis::Connection,
) -> bool {
    assert!(Store::<str>::check(store, key, 1, 0).await.is_ok());
    redis::cmd("EXISTS")
        .arg(store.redis_key(key))
        .query_async::<bool>(cluster)
        .await
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_through_a_master_kill() {
    let Some(mut nodes) = cluster(6, 1).await else {
        return;
    };
    let url = nodes
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    let target = Target::parse(&url, None).unwrap();
    let store = || {
        RedisStore::builder(
            target.clone(),
            Gcra::new(10, Duration::from_secs(3600)).unwrap(),
        )
        .timeout(Duration::from_secs(1))
        .fallback_to_memory(10_000)
        .build()
        .unwrap()
    };
    let (a, b) = (store(), store());
    // Two instances share exact limits, keys on every master.
    for k in 0..8 {
        let key = format!("before-{k}");
        assert_eq!(admitted_alternately(&a, &b, &key, 30).await, 10, "{key}");
    }
    let mut victim = None;
    for (i, node) in nodes.iter().enumerate() {
        let size: u64 = redis::cmd("DBSIZE")
            .query_async(&mut node.client().await)
            .await
            .unwrap();
        if size > 0 && is_master(node).await {
            victim = Some(i);
            break;
        }
    }
    let victim = victim.expect("a master holding keys");
    let loading = load(vec![a.clone(), b.clone()], "during");
    tokio::time::sleep(Duration::from_millis(300)).await;
    nodes[victim].kill();
    let killed = Instant::now();
    let alive: Vec<&RedisServer> = nodes
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != victim)
        .map(|(_, n)| n)
        .collect();
    let alive = &alive;
    until(
        Duration::from_secs(60),
        "a replica took over, the cluster ok",
        || async move {
            let mut masters = 0;
            for node in alive {
                let info = node_info(node, &["CLUSTER", "INFO"])
                    .await
                    .unwrap_or_default();
                if !info.contains("cluster_state:ok") {
                    return false;
                }
                masters += usize::from(is_master(node).await);
            }
            masters == 3
        },
    )
    .await;
    let promoted = killed.elapsed();
    let cluster = target.connect().await.unwrap();
    let mut round = 0;
    until(
        Duration::from_secs(60),
        "both stores decide in the cluster on every slot",
        || {
            round += 1;
            let (a, b, mut cluster) = (&a, &b, cluster.clone());
            async move {
                for k in 0..16 {
                    let key = format!("probe-{round}-{k}");
                    if !decided_in(a, &key, &mut cluster).await
                        || !decided_in(b, &format!("{key}b"), &mut cluster).await
                    {
                        return false;
                    }
                }
                true
            }
        },
    )
    .await;
    let back = killed.elapsed();
    let (checks, errors) = loading.stop().await;
    assert_eq!(errors, 0, "checks failed through the master kill");
    eprintln!(
        "cluster master kill: replica promoted after {promoted:?}, both stores deciding in the cluster after {back:?} ({checks} checks under load, none failed)"
    );
    for k in 0..8 {
        let key = format!("after-{k}");
        assert_eq!(admitted_alternately(&a, &b, &key, 30).await, 10, "{key}");
    }
}
