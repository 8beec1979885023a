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
use ratelimit_test_support::RedisCluster;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_a_cluster() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let nodes = &cluster.nodes;
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
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
    for n in nodes {
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
    let Some(mut cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let target = Target::parse(&cluster.url(), None).unwrap();
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
    let loading = load(vec![a.clone(), b.clone()], "during");
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::block_in_place(|| cluster.kill_a_master());
    let killed = Instant::now();
    let watched = &cluster;
    until(
        Duration::from_secs(60),
        "a replica took over, the cluster ok",
        || async move { tokio::task::block_in_place(|| watched.ok() && watched.masters() == 3) },
    )
    .await;
    let promoted = killed.elapsed();
    let conn = target.connect().await.unwrap();
    let mut round = 0;
    until(
        Duration::from_secs(60),
        "both stores decide in the cluster on every slot",
        || {
            round += 1;
            let (a, b, mut conn) = (&a, &b, conn.clone());
            async move {
                for k in 0..16 {
                    let key = format!("probe-{round}-{k}");
                    if !decided_in(a, &key, &mut conn).await
                        || !decided_in(b, &format!("{key}b"), &mut conn).await
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

/// On a Cluster, admin changes are published without error (a reset, a
/// ban), and shared run-time entries are written and read back (one hash
/// slot), by the refresh: its stores and entries do not subscribe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_and_shared_entries_on_a_cluster() {
    use ratelimit_core::{EntryTable, SharedEntries, SharedEntry};
    use std::sync::{Arc, Mutex};
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let urls: Vec<String> = cluster.nodes.iter().map(RedisServer::url).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let store = RedisStore::builder(
        client.clone(),
        FixedWindow::new(1, Duration::from_secs(3600)).unwrap(),
    )
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap();
    assert!(
        Store::<str>::check(&store, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    assert!(
        !Store::<str>::check(&store, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    Store::<str>::reset(&store, "k").await.unwrap();
    assert!(
        Store::<str>::check(&store, "k", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    Store::<str>::ban(&store, "k", Duration::from_secs(60), 0)
        .await
        .unwrap();
    assert!(Store::<str>::check(&store, "k", 1, 0).await.unwrap().banned);
    let entries =
        ratelimit_redis::RedisEntries::with(client, "cl:", Duration::from_millis(100)).unwrap();
    let copy: Arc<Mutex<Vec<SharedEntry>>> = Arc::default();
    let c = Arc::clone(&copy);
    entries.follow(Arc::new(move |all, _| *c.lock().unwrap() = all));
    let entry = SharedEntry {
        table: EntryTable::Deny,
        scope: String::new(),
        name: "192.0.2.0/24".to_owned(),
        value: String::new(),
        left: Some(Duration::from_secs(60)),
    };
    entries.put(entry, 10).await.unwrap();
    until(Duration::from_secs(10), "the entry read back", || {
        let copy = Arc::clone(&copy);
        async move {
            copy.lock()
                .unwrap()
                .iter()
                .any(|e| e.name == "192.0.2.0/24")
        }
    })
    .await;
}
