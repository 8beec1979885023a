//! A three-node Redis Cluster (feature `cluster`): checks go to the node
//! owning each key's slot, and every key's limit holds.

use crate::harness::Client as _;
use crate::harness::RedisServer;
use ratelimit_core::{FixedWindow, Gcra, Store};
use ratelimit_redis::RedisStore;
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
