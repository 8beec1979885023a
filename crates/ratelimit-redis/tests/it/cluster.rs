//! A Redis Cluster (feature `cluster`): on three nodes, checks go to the
//! node owning each key's slot, and every key's limit holds; on three
//! masters and three replicas, two stores share exact limits, killing a
//! master under load fails no check (the fallback decides meanwhile), and
//! the limits are exact again once a replica has taken over. Given by its
//! node URLs, a Cluster's stores subscribe through one node, so admin
//! changes and shared entries reach every instance at once.

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
pub(crate) async fn decided_in(
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
    a_reset_reaches_b_after_the_kill(&cluster, &a, &b).await;
}

/// The subscribers whose node was killed have moved to a live one: a
/// reset through A reaches B's cached denial at once.
async fn a_reset_reaches_b_after_the_kill(cluster: &RedisCluster, a: &RedisStore, b: &RedisStore) {
    let live_subscribers = || {
        cluster
            .nodes
            .iter()
            .filter_map(|n| {
                let out = ratelimit_test_support::redis_cluster::cli(
                    n.port,
                    &["PUBSUB", "NUMSUB", "ratelimit:invalidate"],
                )?;
                out.lines().nth(1)?.trim().parse::<i64>().ok()
            })
            .sum::<i64>()
    };
    until(
        Duration::from_secs(30),
        "both stores subscribed again",
        || async { tokio::task::block_in_place(live_subscribers) >= 2 },
    )
    .await;
    // after-0 is used up (10 of 30 admitted): B's denial is cached, its
    // second running from no earlier than `cached`.
    let cached = Instant::now();
    assert!(
        !Store::<str>::check(b, "after-0", 1, 0)
            .await
            .unwrap()
            .allowed
    );
    Store::<str>::reset(a, "after-0").await.unwrap();
    let took = first(b, "after-0", true, cached).await;
    eprintln!("after the kill, a reset seen on the other instance after {took:?}");
    // Under B's deny cache's second (a busy machine may delay the
    // publication by hundreds of ms).
    assert!(
        took.is_some_and(|t| t <= Duration::from_millis(900)),
        "{took:?}"
    );
}

/// The Cluster's stores from its node URLs (as `REDIS_URL` gives them):
/// two stores with deny caches, one subscribed through some node.
fn parsed_store(urls: &[String]) -> RedisStore {
    let target = Target::parse(&urls.join(","), None).unwrap();
    RedisStore::builder(
        target,
        FixedWindow::new(1, Duration::from_secs(3600)).unwrap(),
    )
    .prefix("cl:")
    .timeout(Duration::from_secs(5))
    .build()
    .unwrap()
}

/// How many connections, over every node, are subscribed to `channel`.
async fn subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    let mut n = 0;
    for node in &cluster.nodes {
        let mut c = node.client().await;
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut c)
            .await
            .unwrap();
        n += counts[0].1;
    }
    n
}

/// How long after `since` `store` first answers `want` for `key` (polled
/// every 2 ms for up to 5 s).
async fn first(store: &RedisStore, key: &str, want: bool, since: Instant) -> Option<Duration> {
    while since.elapsed() < Duration::from_secs(5) {
        if Store::<str>::check(store, key, 1, 0).await.unwrap().allowed == want {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

/// On a Cluster given by its node URLs, a reset, a ban and an unban made
/// through store A reach store B's deny cache at once, by pub/sub through
/// one node (a `PUBLISH` reaches every node), well within the deny
/// cache's second; shared run-time entries are read back (one hash slot)
/// at once too, not only at the refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_reach_every_instance_of_a_cluster_at_once() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let urls: Vec<String> = cluster.nodes.iter().map(RedisServer::url).collect();
    let (a, b) = (parsed_store(&urls), parsed_store(&urls));
    until(Duration::from_secs(10), "both stores subscribed", || {
        let cluster = &cluster;
        async move { subscribers(cluster, "cl:invalidate").await >= 2 }
    })
    .await;
    // From before B's denying check, under its deny cache's second (a
    // busy machine may delay the publication by hundreds of ms).
    let at_once = Duration::from_millis(900);
    for key in ["user:{1}", "user:{2}", "user:{3}"] {
        // B's denial, cached: answered without a round trip (its second
        // running from no earlier than `cached`).
        let cached = Instant::now();
        for _ in 0..3 {
            Store::<str>::check(&b, key, 1, 0).await.unwrap();
        }
        Store::<str>::reset(&a, key).await.unwrap();
        let took = first(&b, key, true, cached).await;
        eprintln!("{key}: reset seen on the other instance after {took:?}");
        assert!(took.is_some_and(|t| t <= at_once), "{key}: {took:?}");
        Store::<str>::ban(&a, key, Duration::from_secs(3600), 0)
            .await
            .unwrap();
        let cached = Instant::now();
        assert!(Store::<str>::check(&b, key, 1, 0).await.unwrap().banned);
        Store::<str>::unban(&a, key).await.unwrap();
        Store::<str>::reset(&a, key).await.unwrap();
        let took = first(&b, key, true, cached).await;
        assert!(took.is_some_and(|t| t <= at_once), "{key} unban: {took:?}");
    }
    shared_entries_on_a_cluster(&cluster, &urls).await;
}

/// Entries written through one `RedisEntries` reach another's follower by
/// its subscription: the refresh is a minute, far past the bound.
async fn shared_entries_on_a_cluster(cluster: &RedisCluster, urls: &[String]) {
    use ratelimit_core::plumbing::{EntryTable, SharedEntries, SharedEntry};
    use std::sync::{Arc, Mutex};
    let target = || Target::parse(&urls.join(","), None).unwrap();
    let writer =
        ratelimit_redis::RedisEntries::with(target(), "cl:", Duration::from_secs(60)).unwrap();
    let reader =
        ratelimit_redis::RedisEntries::with(target(), "cl:", Duration::from_secs(60)).unwrap();
    let copy: Arc<Mutex<Vec<SharedEntry>>> = Arc::default();
    let c = Arc::clone(&copy);
    reader.follow(Arc::new(move |all, _| *c.lock().unwrap() = all));
    until(
        Duration::from_secs(10),
        "the follower subscribed",
        || async { subscribers(cluster, "cl:entries").await >= 1 },
    )
    .await;
    let entry = SharedEntry {
        table: EntryTable::Deny,
        scope: String::new(),
        name: "192.0.2.0/24".to_owned(),
        value: String::new(),
        left: Some(Duration::from_secs(60)),
    };
    let since = Instant::now();
    writer.put(entry, 10).await.unwrap();
    until(Duration::from_secs(5), "the entry read back", || {
        let copy = Arc::clone(&copy);
        async move {
            copy.lock()
                .unwrap()
                .iter()
                .any(|e| e.name == "192.0.2.0/24")
        }
    })
    .await;
    eprintln!(
        "entry seen by the other instance after {:?}",
        since.elapsed()
    );
}
