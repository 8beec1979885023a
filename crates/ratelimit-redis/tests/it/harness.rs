//! A private redis-server per test: the workspace's one harness
//! (`ratelimit-test-support`), plus a client, the `server!` macro and a
//! bounded wait.

use ratelimit_core::StoreError;
pub use ratelimit_test_support::{RedisServer, SplitMix64 as Rng};
use std::future::Future;
use std::time::{Duration, Instant};

/// A connection to the test server.
pub trait Client {
    /// A new multiplexed connection to the server.
    async fn client(&self) -> redis::aio::MultiplexedConnection;
}

impl Client for RedisServer {
    async fn client(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

/// Starts a server, or returns from the test (see `RedisServer::start`).
#[macro_export]
macro_rules! server {
    () => {
        match $crate::harness::RedisServer::start() {
            Some(s) => s,
            None => return,
        }
    };
}

/// `tasks` concurrent tasks, alternately on stores `a` and `b`, each making
/// `each` cost-1 checks of `key`: how many were admitted.
pub async fn admitted_by_tasks(
    a: &ratelimit_redis::RedisStore,
    b: &ratelimit_redis::RedisStore,
    key: &str,
    tasks: usize,
    each: usize,
) -> u64 {
    use ratelimit_core::Store;
    let mut handles = Vec::new();
    for i in 0..tasks {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let key = key.to_owned();
        handles.push(tokio::spawn(async move {
            let mut admitted = 0u64;
            for _ in 0..each {
                let d = Store::<str>::check(&store, &key, 1, 0).await.unwrap();
                admitted += u64::from(d.allowed);
            }
            admitted
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total
}

/// How many times Redis ran a script (`INFO commandstats`): one per round
/// trip of a store.
pub async fn round_trips(c: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(c, "evalsha").await
}

/// How many times the server ran `command` (lowercase), from scripts too
/// (`INFO commandstats`).
pub async fn command_calls(c: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|l| l.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// Waits until `ready` holds, polling every 50 ms; panics naming `what`
/// after `bound` (generous: a loaded machine is slow, never wrong).
pub async fn until<F, Fut>(bound: Duration, what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !ready().await {
        assert!(start.elapsed() < bound, "not within {bound:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `call`'s value, tried again while a store reconnects (without a
/// fallback, a broken connection is an error until the reconnect): up to
/// 200 tries 50 ms apart.
pub(crate) async fn again<T, F: std::future::IntoFuture<Output = Result<T, StoreError>>>(
    call: impl Fn() -> F,
) -> T {
    for _ in 0..200 {
        if let Ok(v) = call().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no answer within 10 s");
}
