//! Pub/sub invalidation across instances: a reset, an unban or a ban made
//! through store A reaches store B's deny cache and leases at once (well
//! within the deny cache's one second), the message names a secret key by
//! its hash only, and the subscriber comes back after its connection is
//! killed.

use crate::harness::Client as _;
use crate::server;
use ratelimit_core::algorithm::{StableHasher, StableKey};
use ratelimit_core::{FixedWindow, Store};
use ratelimit_redis::RedisStore;
use std::fmt;
use std::time::{Duration, Instant};

/// The longest B may take to see A's change: from A's call returning, or
/// where B's cached denial is undone, from before B's denying check was
/// sent. Under the deny cache's one second, after which B would ask Redis
/// again by itself; a busy machine may delay the publication by hundreds
/// of ms.
const AT_ONCE: Duration = Duration::from_millis(900);

fn store(url: String, lease: bool) -> RedisStore {
    let b = RedisStore::builder(url, FixedWindow::new(3, Duration::from_secs(3600)).unwrap())
        .prefix("inv:")
        .timeout(Duration::from_secs(5));
    let b = if lease {
        b.lease(3, Duration::from_secs(60))
    } else {
        b
    };
    b.build().unwrap()
}

async fn admits<K: fmt::Display + StableKey + Send + Sync + ?Sized>(
    s: &RedisStore,
    key: &K,
) -> bool {
    Store::<K>::check(s, key, 1, 0).await.unwrap().allowed
}

/// Waits (bounded) until `n` clients are subscribed to the stores'
/// channel.
async fn subscribed(server: &crate::harness::RedisServer, n: i64) {
    subscribed_to(server, "inv:invalidate", n).await;
}

/// Waits (bounded) until `n` clients are subscribed to `channel`.
pub async fn subscribed_to(server: &crate::harness::RedisServer, channel: &str, n: i64) {
    let mut c = server.client().await;
    for _ in 0..500 {
        let (_, count): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async::<Vec<(String, i64)>>(&mut c)
            .await
            .unwrap()
            .remove(0);
        if count >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {n} subscribers after 5 s");
}

/// How long after `since` `b` first answers `want` for `key`, polled every
/// 2 ms for up to 5 s (`None`: never).
async fn first<K: fmt::Display + StableKey + Send + Sync + ?Sized>(
    b: &RedisStore,
    key: &K,
    want: bool,
    since: Instant,
) -> Option<Duration> {
    while since.elapsed() < Duration::from_secs(5) {
        if admits(b, key).await == want {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

/// B's denial of `key`, cached: its further checks make no round trip.
/// Returns the instant before the denying check was sent: the deny
/// cache's second runs from no earlier.
async fn denied_and_cached<K: fmt::Display + StableKey + Send + Sync + ?Sized>(
    b: &RedisStore,
    key: &K,
) -> Instant {
    for _ in 0..3 {
        admits(b, key).await;
    }
    let sent = Instant::now();
    assert!(!admits(b, key).await);
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_on_a_admits_at_once_on_b() {
    let server = server!();
    let (a, b) = (store(server.url(), false), store(server.url(), false));
    subscribed(&server, 2).await;
    let cached = denied_and_cached(&b, "10.0.0.1").await;
    Store::<str>::reset(&a, "10.0.0.1").await.unwrap();
    let took = first(&b, "10.0.0.1", true, cached).await;
    eprintln!("reset seen on the other instance after {took:?}");
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unban_on_a_admits_at_once_on_b() {
    let server = server!();
    let (a, b) = (store(server.url(), false), store(server.url(), false));
    subscribed(&server, 2).await;
    Store::<str>::ban(&a, "10.0.0.2", Duration::from_secs(3600), 0)
        .await
        .unwrap();
    // Denied by the ban, and cached (the deny cache's second runs from no
    // earlier than `cached`).
    let cached = Instant::now();
    assert!(!admits(&b, "10.0.0.2").await);
    assert!(!admits(&b, "10.0.0.2").await);
    Store::<str>::unban(&a, "10.0.0.2").await.unwrap();
    let took = first(&b, "10.0.0.2", true, cached).await;
    eprintln!("unban seen on the other instance after {took:?}");
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{took:?}");
}

/// B holds a lease of the key (units it would spend without asking
/// Redis): A's ban takes it away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_on_a_denies_at_once_on_b_despite_its_lease() {
    let server = server!();
    let (a, b) = (store(server.url(), false), store(server.url(), true));
    subscribed(&server, 2).await;
    // The first check marks the key hot, the second takes a lease of 2.
    assert!(admits(&b, "10.0.0.3").await);
    assert!(admits(&b, "10.0.0.3").await);
    Store::<str>::ban(&a, "10.0.0.3", Duration::from_secs(3600), 0)
        .await
        .unwrap();
    let took = first(&b, "10.0.0.3", false, Instant::now()).await;
    eprintln!("ban seen on the other instance after {took:?}");
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{took:?}");
    let d = Store::<str>::check(&b, "10.0.0.3", 1, 0).await.unwrap();
    assert!(
        d.banned && d.wait > Some(Duration::from_secs(3500)),
        "{d:?}"
    );
}

struct Secret(&'static str);

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl StableKey for Secret {
    fn write_stable(&self, h: &mut StableHasher) {
        h.write(self.0.as_bytes());
    }

    fn is_secret(&self) -> bool {
        true
    }
}

/// A secret key is reset on B too, and the message names it by the hash
/// its Redis keys have, never its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_key_travels_as_its_hash() {
    let server = server!();
    let (a, b) = (store(server.url(), false), store(server.url(), false));
    let client = redis::Client::open(server.url()).unwrap();
    let mut listen = client.get_async_pubsub().await.unwrap();
    listen.subscribe("inv:invalidate").await.unwrap();
    subscribed(&server, 3).await;
    let key = Secret("sk-live-0123456789");
    let cached = denied_and_cached(&b, &key).await;
    Store::<Secret>::reset(&a, &key).await.unwrap();
    let took = first(&b, &key, true, cached).await;
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{took:?}");
    let mut messages = listen.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(5), async {
        std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut messages), cx)
        })
        .await
    })
    .await
    .unwrap()
    .unwrap();
    let payload: String = msg.get_payload().unwrap();
    assert!(!payload.contains(key.0), "{payload}");
    let hashed = a.secret_redis_key(key.0).unwrap();
    let name = payload.strip_prefix("r ").unwrap();
    assert!(hashed.contains(name), "{payload} vs {hashed}");
}

/// The subscriber's connection killed: it subscribes again, and changes
/// reach B again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subscriber_comes_back_after_its_connection_is_killed() {
    let server = server!();
    let (a, b) = (store(server.url(), false), store(server.url(), false));
    subscribed(&server, 2).await;
    let mut c = server.client().await;
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async::<i64>(&mut c)
        .await
        .unwrap();
    subscribed(&server, 2).await;
    let cached = denied_and_cached(&b, "10.0.0.4").await;
    Store::<str>::reset(&a, "10.0.0.4").await.unwrap();
    let took = first(&b, "10.0.0.4", true, cached).await;
    assert!(took.is_some_and(|t| t <= AT_ONCE), "{took:?}");
}

/// What one check of the hammer saw: when it was sent, through which
/// store, and whether it was admitted.
type Seen = (Instant, usize, bool);

/// A ban through A while 64 tasks (32 on each store, leases of 8 units
/// for 60 s on both, a limit the algorithm never reaches) hammer the key.
/// Counted exactly, of the checks sent after A's `ban` returned:
/// - on A, none admitted (A drops its lease once Redis has the ban, and a
///   lease taken by a check in flight then is not recorded);
/// - on B, at most what its leases held or were being taken at the ban
///   (7 units for the lease held and for each of its 32 tasks' takes in
///   flight) until the publication reaches it, and none sent 900 ms or
///   more after A's return: B has the publication by then, and no lease
///   survives it (the last 600 ms outlast B's deny cache, which asks
///   Redis again after 1 s, so a lease kept past the ban would admit
///   there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_while_64_tasks_hammer_the_key_with_leases() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let server = server!();
    let leased = || {
        RedisStore::builder(
            server.url(),
            FixedWindow::new(1_000_000, Duration::from_secs(3600)).unwrap(),
        )
        .prefix("inv:")
        .timeout(Duration::from_secs(5))
        .lease(8, Duration::from_secs(60))
        .build()
        .unwrap()
    };
    let stores = Arc::new([leased(), leased()]);
    subscribed(&server, 2).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (stores, stop) = (Arc::clone(&stores), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut seen: Vec<Seen> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    seen.push((sent, i % 2, admits(&stores[i % 2], "10.0.0.9").await));
                    // Answers from the deny cache are ready at once: let
                    // every task run.
                    tokio::task::yield_now().await;
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    Store::<str>::ban(&stores[0], "10.0.0.9", Duration::from_secs(3600), 0)
        .await
        .unwrap();
    let at = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<Seen> = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let count = |store: usize, from: Instant, to: Instant| {
        let of = |s: &&Seen| s.1 == store && s.0 > from && s.0 <= to;
        let sent = all.iter().filter(of).count();
        let admitted = all.iter().filter(of).filter(|s| s.2).count();
        (sent, admitted)
    };
    let far = at + Duration::from_secs(3600);
    let before = (
        count(
            0,
            at - Duration::from_secs(60),
            at - Duration::from_millis(200),
        )
        .1,
        count(
            1,
            at - Duration::from_secs(60),
            at - Duration::from_millis(200),
        )
        .1,
    );
    let on_a = count(0, at, far);
    let on_b_soon = count(1, at, at + AT_ONCE);
    let on_b_late = count(1, at + AT_ONCE, far);
    eprintln!(
        "admitted before the ban (A, B): {before:?}; sent and admitted after it: \
         A {on_a:?}, B within {AT_ONCE:?} {on_b_soon:?}, B later {on_b_late:?}"
    );
    assert!(before.0 > 0 && before.1 > 0, "{before:?}");
    assert!(
        on_a.0 > 0 && on_b_late.0 > 0,
        "too few checks: {on_a:?} {on_b_late:?}"
    );
    assert_eq!(on_a.1, 0, "admitted on A after its ban returned");
    assert!(on_b_soon.1 <= 7 * 33, "{on_b_soon:?}");
    assert_eq!(on_b_late.1, 0, "admitted on B after it had the ban");
}
