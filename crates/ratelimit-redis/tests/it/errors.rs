//! Redis answering with an error, of any kind, is a store failure like a
//! timeout. Each class is injected into a real redis-server where one can
//! produce it, otherwise into a fake RESP server; for each, with a
//! fallback the limit holds exactly (in memory), without one every call is
//! an `Err` for the caller's failure policy, the breaker opens after its
//! threshold, and (feature `metrics`) the failures are counted by kind.

use crate::harness::Client as _;
use crate::harness::RedisServer;
use ratelimit_core::{AnyAlgorithm, Gcra, SlidingLog, Store};
use ratelimit_redis::{BreakerConfig, BreakerState, RedisStore};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpListener;

/// Consecutive failures that open the breaker.
const THRESHOLD: u32 = 3;
/// The limit: 5 an hour, so no check in a test gets any back.
const LIMIT: u64 = 5;
const CHECKS: u64 = 20;
/// Errors come back at once; this only bounds a loaded machine.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

fn gcra() -> AnyAlgorithm {
    Gcra::new(LIMIT, Duration::from_secs(3600)).unwrap().into()
}

/// Where the stores connect, and how the failure is set up.
struct Env {
    url: String,
    algorithm: AnyAlgorithm,
    timeout: Duration,
    /// Whether the stores decide once before the failure is injected
    /// (connected, script loaded), on a key of their own.
    warm: bool,
    server: Option<RedisServer>,
    _fake: Option<Fake>,
}

impl Env {
    fn real(server: RedisServer) -> Self {
        Self {
            url: server.url(),
            algorithm: gcra(),
            timeout: ANSWER_TIMEOUT,
            warm: true,
            server: Some(server),
            _fake: None,
        }
    }

    async fn fake(reply: impl Fn(&[String]) -> String + Send + Sync + 'static) -> Self {
        let fake = Fake::start(reply).await;
        Self {
            url: format!("redis://127.0.0.1:{}/", fake.port),
            algorithm: gcra(),
            timeout: ANSWER_TIMEOUT,
            warm: false,
            server: None,
            _fake: Some(fake),
        }
    }

    fn store(&self, fallback: bool) -> RedisStore {
        let b = RedisStore::builder(self.url.clone(), self.algorithm)
            .name("logins")
            .timeout(self.timeout)
            .breaker(BreakerConfig {
                failure_threshold: THRESHOLD,
                cool_down: Duration::from_secs(3600),
            });
        if fallback {
            b.fallback_to_memory(100)
        } else {
            b
        }
        .build()
        .unwrap()
    }

    /// A client of the real server, for injecting.
    async fn admin(&self) -> redis::aio::MultiplexedConnection {
        self.server.as_ref().expect("a real server").client().await
    }

    /// The Redis keys the stores use for `k` and `warm`.
    fn keys(&self) -> [String; 2] {
        let store = self.store(false);
        [store.redis_key("k"), store.redis_key("warm")]
    }
}

async fn run(admin: &mut redis::aio::MultiplexedConnection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd
        .query_async(admin)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// The checks every class must pass. `kinds`: what the failures may be
/// counted as (the first is the class's own; a failure injected on a live
/// connection may first show as `io`).
async fn matrix(env: Env, kinds: &[&str], inject: impl AsyncFnOnce(&Env)) {
    // A store connects when built: unwarmed ones are built after the
    // injection, so that their first connection meets it.
    let mut inject = Some(inject);
    if !env.warm {
        (inject.take().expect("once"))(&env).await;
    }
    let with = env.store(true);
    let without = env.store(false);
    if let Some(inject) = inject {
        for s in [&with, &without] {
            assert!(Store::<str>::check(s, "warm", 1, 0).await.unwrap().allowed);
        }
        inject(&env).await;
    }
    let named = |msg: &str| kinds.iter().any(|k| msg.contains(&format!("({k})")));

    // With the fallback: no error, and exactly the limit admitted.
    let mut admitted = 0;
    for i in 0..CHECKS {
        let d = Store::<str>::check(&with, "k", 1, 0)
            .await
            .unwrap_or_else(|e| panic!("check {i} escaped the fallback: {e}"));
        admitted += u64::from(d.allowed);
        let open = i + 1 >= u64::from(THRESHOLD);
        assert_eq!(
            with.breaker_state() == BreakerState::Open,
            open,
            "{kinds:?}: after {} failures",
            i + 1
        );
    }
    assert_eq!(admitted, LIMIT, "{kinds:?}: the limit must hold");
    Store::<str>::refund(&with, "k", 1, 0, 0).await.unwrap();
    assert!(
        Store::<str>::check(&with, "k", 1, 0).await.unwrap().allowed,
        "the refund reached the fallback"
    );

    // Without: every call is an error naming the kind, for the caller's
    // policy; the breaker opens after the threshold, and calls stop there.
    // (A refund of a key Redis has no state for writes nothing, and
    // succeeds even on a read-only or full server: refund one it has.)
    let e = Store::<str>::refund(&without, "warm", 1, 0, 0)
        .await
        .unwrap_err();
    assert!(named(&e.to_string()), "{kinds:?}: {e}");
    for calls in 2..=CHECKS + 1 {
        let e = Store::<str>::check(&without, "k", 1, 0).await.unwrap_err();
        let msg = e.to_string();
        if calls <= u64::from(THRESHOLD) {
            assert!(named(&msg), "{kinds:?}: {msg}");
        } else {
            assert!(msg.contains("(breaker_open)"), "{kinds:?}: {msg}");
        }
        assert_eq!(
            without.breaker_state() == BreakerState::Open,
            calls >= u64::from(THRESHOLD),
            "{kinds:?}: after {calls} calls"
        );
    }
}

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

/// Runs a case on a current-thread runtime (every task on this thread),
/// under a recorder of its own, and returns the `ratelimit_redis_*`
/// counters it saw, as `name{label=value}`.
fn counting(case: impl Future<Output = ()>) -> BTreeMap<String, u64> {
    let recorder = Counting::default();
    let counts = recorder.0.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || rt.block_on(case));
    drop(rt);
    let counts = counts.lock().unwrap().clone();
    counts
}

/// Runs `matrix` and checks the counters: each store's first `THRESHOLD`
/// calls failed with one of `kinds`, the rest were skipped by the open
/// breaker, and the fallback decided all of its store's checks.
fn case(
    kinds: &'static [&'static str],
    env: impl AsyncFnOnce() -> Option<Env>,
    inject: impl AsyncFnOnce(&Env),
) {
    let counts = counting(async move {
        let Some(env) = env().await else { return };
        matrix(env, kinds, inject).await;
    });
    if !cfg!(feature = "metrics") || counts.is_empty() {
        return; // no metrics, or skipped without redis-server
    }
    let count = |k: &str| {
        counts
            .get(&format!(
                "ratelimit_redis_errors_total{{limit=logins,kind={k}}}"
            ))
            .copied()
            .unwrap_or(0)
    };
    let failed: u64 = kinds.iter().map(|k| count(k)).sum();
    assert_eq!(failed, 2 * u64::from(THRESHOLD), "{counts:?}");
    assert!(count(kinds[0]) >= 1, "{counts:?}");
    // Each store made CHECKS + 1 calls to Redis, or tried to (the refund
    // with the fallback goes straight to memory while the breaker is open).
    let skipped = 2 * (CHECKS + 1 - u64::from(THRESHOLD));
    assert_eq!(count("breaker_open"), skipped, "{counts:?}");
    let errors: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("ratelimit_redis_errors_total"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(errors, failed + skipped, "nothing else: {counts:?}");
    assert_eq!(
        counts.get("ratelimit_redis_fallback_total{limit=logins}"),
        Some(&(CHECKS + 1)),
        "{counts:?}"
    );
}

async fn real() -> Option<Env> {
    RedisServer::start().map(Env::real)
}

// ---- a real redis-server ----

#[test]
fn oom() {
    case(&["oom"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]).await;
        run(&mut c, &["CONFIG", "SET", "maxmemory", "1"]).await;
    });
}

#[test]
fn noperm() {
    case(&["noperm"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["ACL", "SETUSER", "default", "-evalsha", "-eval"]).await;
    });
}

#[test]
fn noauth_on_a_new_connection() {
    let env = async || {
        let mut env = Env::real(RedisServer::start()?);
        env.warm = false;
        Some(env)
    };
    // Redis refuses long commands before AUTH: `-ERR Protocol error:
    // unauthenticated multibulk length`, then closes the connection.
    case(&["noauth", "io"], env, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "requirepass", "secret"]).await;
    });
}

#[test]
fn noauth_after_the_connection_is_cut() {
    case(&["noauth", "io"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "requirepass", "secret"]).await;
        // Every client but this one: the stores reconnect, without the
        // password.
        run(&mut c, &["CLIENT", "KILL", "TYPE", "normal"]).await;
    });
}

#[test]
fn wrongpass() {
    let env = async || {
        let mut env = Env::real(RedisServer::start()?);
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "requirepass", "secret"]).await;
        env.url = format!(
            "redis://:not-the-secret@127.0.0.1:{}/",
            env.server.as_ref()?.port
        );
        env.warm = false;
        Some(env)
    };
    case(&["wrongpass"], env, async |_| {});
}

/// An address where no master will ever answer.
fn nowhere() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port().to_string()
}

#[test]
fn readonly_replica() {
    case(&["readonly"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["REPLICAOF", "127.0.0.1", &nowhere()]).await;
    });
}

#[test]
fn masterdown() {
    case(&["masterdown"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "replica-serve-stale-data", "no"]).await;
        run(&mut c, &["REPLICAOF", "127.0.0.1", &nowhere()]).await;
    });
}

#[test]
fn busy_script() {
    case(&["busy"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "10"]).await;
        // Another client runs a script that never ends (it is never
        // answered; the task ends with the runtime).
        let mut hog = env.admin().await;
        tokio::spawn(async move {
            let _: Result<(), _> = redis::cmd("EVAL")
                .arg("while true do end")
                .arg(0)
                .query_async(&mut hog)
                .await;
        });
        // Past the threshold, the server answers BUSY.
        let mut probe = env.admin().await;
        loop {
            match redis::cmd("PING").query_async::<()>(&mut probe).await {
                Err(e) if e.code() == Some("BUSY") => break,
                _ => tokio::task::yield_now().await,
            }
        }
    });
}

#[test]
fn paused_server_times_out() {
    let env = async || {
        let mut env = Env::real(RedisServer::start()?);
        // Every call to the paused server waits this out (6 of them); the
        // warm-up calls before the pause must not, even on a busy machine.
        env.timeout = Duration::from_millis(500);
        Some(env)
    };
    case(&["timeout"], env, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["CLIENT", "PAUSE", "600000", "ALL"]).await;
    });
}

#[test]
fn wrongtype_at_our_key() {
    case(&["wrongtype"], real, async |env| {
        let mut c = env.admin().await;
        for key in env.keys() {
            run(&mut c, &["DEL", &key]).await;
            run(&mut c, &["HSET", &key, "f", "v"]).await;
        }
    });
}

#[test]
fn wrongtype_at_a_sliding_log_key() {
    let env = async || {
        let mut env = Env::real(RedisServer::start()?);
        env.algorithm = SlidingLog::new(LIMIT, Duration::from_secs(3600))
            .unwrap()
            .into();
        Some(env)
    };
    case(&["wrongtype"], env, async |env| {
        let mut c = env.admin().await;
        for key in env.keys() {
            run(&mut c, &["SET", &key, "x"]).await;
        }
    });
}

#[test]
fn script_error_on_unreadable_state() {
    case(&["err"], real, async |env| {
        let mut c = env.admin().await;
        for key in env.keys() {
            run(&mut c, &["SET", &key, "garbage"]).await;
        }
    });
}

#[test]
fn script_flushed_and_reload_refused() {
    case(&["noperm"], real, async |env| {
        let mut c = env.admin().await;
        run(&mut c, &["SCRIPT", "FLUSH"]).await;
        run(&mut c, &["ACL", "SETUSER", "default", "-script|load"]).await;
    });
}

// ---- a fake server, for what one real server cannot say ----

/// A fake Redis answering `EVALSHA` with `reply`, and everything else as
/// a server would (`SCRIPT LOAD` refused, unless `loads` is the script's
/// hash).
fn answering(reply: &'static str, loads: Option<String>) -> impl AsyncFnOnce() -> Option<Env> {
    async move || {
        Some(
            Env::fake(move |cmd| match cmd[0].to_ascii_uppercase().as_str() {
                "EVALSHA" => reply.to_owned(),
                "SCRIPT" => match &loads {
                    Some(hash) => format!("${}\r\n{hash}\r\n", hash.len()),
                    None => "-ERR no scripts here\r\n".to_owned(),
                },
                "PING" => "+PONG\r\n".to_owned(),
                _ => "+OK\r\n".to_owned(),
            })
            .await,
        )
    }
}

#[test]
fn loading() {
    let r = "-LOADING Redis is loading the dataset in memory\r\n";
    case(&["loading"], answering(r, None), async |_| {});
}

#[test]
fn clusterdown() {
    let r = "-CLUSTERDOWN The cluster is down\r\n";
    case(&["clusterdown"], answering(r, None), async |_| {});
}

#[test]
fn tryagain() {
    let r = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
    case(&["tryagain"], answering(r, None), async |_| {});
}

#[test]
fn misconf() {
    let r = "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk\r\n";
    case(&["misconf"], answering(r, None), async |_| {});
}

#[test]
fn unknown_error_code() {
    let r = "-SOMETHINGNEW never seen before\r\n";
    case(&["other"], answering(r, None), async |_| {});
}

#[test]
fn noscript_after_a_successful_reload() {
    let hash = RedisStore::builder("redis://127.0.0.1:1/", gcra())
        .build()
        .unwrap()
        .script_hash()
        .to_owned();
    let r = "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    case(&["noscript"], answering(r, Some(hash)), async |_| {});
}

#[test]
fn reply_of_the_wrong_shape() {
    for r in [
        "*2\r\n:1\r\n:4\r\n",
        // Checks answer 5 numbers, refunds 4: 6 is wrong for both.
        "*6\r\n:1\r\n:4\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
        "*4\r\n:7\r\n:4\r\n:0\r\n:0\r\n",
        "*0\r\n",
    ] {
        case(&["reply"], answering(r, None), async |_| {});
    }
}

#[test]
fn reply_of_the_wrong_type() {
    for r in [
        "+OK\r\n",
        ":1\r\n",
        "$3\r\nabc\r\n",
        "*4\r\n$1\r\nx\r\n:4\r\n:0\r\n:0\r\n",
        "$-1\r\n",
    ] {
        case(&["reply"], answering(r, None), async |_| {});
    }
}

/// A fake Redis on 127.0.0.1: reads commands (RESP arrays of bulk
/// strings) and answers each with `reply(command)`. Stops when dropped.
struct Fake {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Fake {
    async fn start(reply: impl Fn(&[String]) -> String + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let reply = Arc::new(reply);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let reply = reply.clone();
                tokio::spawn(async move {
                    let (r, mut w) = socket.into_split();
                    let mut r = BufReader::new(r);
                    while let Some(cmd) = read_command(&mut r).await {
                        if w.write_all(reply(&cmd).as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { port, task }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_command(r: &mut BufReader<OwnedReadHalf>) -> Option<Vec<String>> {
    let n = read_header(r, '*').await?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let len = read_header(r, '$').await?;
        let mut buf = vec![0; len + 2];
        r.read_exact(&mut buf).await.ok()?;
        buf.truncate(len);
        args.push(String::from_utf8_lossy(&buf).into_owned());
    }
    Some(args)
}

/// `*3` or `$5`: the number after `prefix`.
async fn read_header(r: &mut BufReader<OwnedReadHalf>, prefix: char) -> Option<usize> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    line.trim_end().strip_prefix(prefix)?.parse().ok()
}

/// A write-back after a loss (`data_loss.rs`) is counted: the loss, each
/// key written, and each key not written (its failure as any store
/// failure, by kind); a failed write-back is tried again whole.
#[test]
fn write_backs_and_their_failures_are_counted() {
    const T0: u64 = 1_700_000_000_123_456_789;
    let counts = counting(async {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let spec = "fixed-window 1/1h".parse::<AnyAlgorithm>().unwrap();
        let a = RedisStore::builder(server.url(), spec)
            .name("logins")
            .prefix("t:")
            .time_source(ratelimit_redis::TimeSource::Caller)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        assert!(Store::<str>::check(&a, "k", 1, T0).await.unwrap().allowed);
        assert_eq!(a.write_back(T0).await.unwrap(), 0);
        let mut c = server.client().await;
        run(&mut c, &["FLUSHALL"]).await;
        // Something else at the key's ban key: the write-back fails.
        run(&mut c, &["SET", "t:{k}:ban", "foreign"]).await;
        assert!(a.write_back(T0 + 1).await.is_err());
        run(&mut c, &["DEL", "t:{k}:ban"]).await;
        assert_eq!(a.write_back(T0 + 2).await.unwrap(), 1, "tried again");
        assert!(
            !Store::<str>::check(&a, "k", 1, T0 + 3)
                .await
                .unwrap()
                .allowed
        );
    });
    if !cfg!(feature = "metrics") || counts.is_empty() {
        return;
    }
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    assert_eq!(
        count("ratelimit_redis_losses_total{limit=logins}"),
        1,
        "{counts:?}"
    );
    let result = |r: &str| {
        count(&format!(
            "ratelimit_redis_write_back_total{{limit=logins,result={r}}}"
        ))
    };
    assert_eq!((result("written"), result("failed")), (1, 1), "{counts:?}");
    let errors: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("ratelimit_redis_errors_total"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(errors, 1, "{counts:?}");
}

// ---- a metrics recorder of the test's own ----

#[derive(Default)]
struct Counting(Counts);

struct One(String, Counts);

impl metrics::CounterFn for One {
    fn increment(&self, value: u64) {
        *self.1.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }

    fn absolute(&self, value: u64) {
        self.1.lock().unwrap().insert(self.0.clone(), value);
    }
}

impl metrics::Recorder for Counting {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        metrics::Counter::from_arc(Arc::new(One(name, self.0.clone())))
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

// ---- the script itself ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_is_reloaded_after_flush() {
    let server = crate::server!();
    let store = RedisStore::builder(
        server.url(),
        Gcra::new(10, Duration::from_secs(60)).unwrap(),
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
    let mut c = server.client().await;
    run(&mut c, &["SCRIPT", "FLUSH"]).await;
    let d = Store::<str>::check(&store, "k", 1, 0).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 8);
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(store.script_hash())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(exists, vec![true]);
}
