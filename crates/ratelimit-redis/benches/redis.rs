//! Loopback benchmark of the Redis store: checks per second and p50/p99
//! latency at 1, 16 and 128 concurrent callers, for GCRA and the sliding
//! window, next to `redis-benchmark` running the same script with the same
//! keys and arguments (the server's ceiling) and a naive fixed window
//! (`INCR` then `EXPIRE ... NX`, two commands, two round trips).
//!
//! Run: `cargo bench -p ratelimit-redis --bench redis` (options after
//! `--`: `--secs N` per run, default 2; `--rounds N`, default 3, reporting
//! medians). It starts its own redis-server on a free port and prints a
//! Markdown table. Rounds alternate between our client and redis-benchmark
//! so that both see the same load on a shared machine.

#![allow(missing_docs)]

use ratelimit_core::{AnyAlgorithm, Gcra, SlidingWindow, Store};
use ratelimit_redis::RedisStore;
use ratelimit_test_support::{RedisServer, SplitMix64 as Rng};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 10_000;
const CALLERS: [usize; 3] = [1, 16, 128];

struct Row {
    what: String,
    callers: usize,
    rate: f64,
    p50_us: f64,
    p99_us: f64,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

/// Runs `callers` tasks calling `op` for `secs`, measuring each call.
async fn measure<F, Fut>(callers: usize, secs: f64, op: F) -> (f64, f64, f64)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..callers {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0xbe4c ^ c as u64);
            let mut lat = Vec::with_capacity(100_000);
            while Instant::now() < end {
                let t = Instant::now();
                op(rng.below(KEYS)).await;
                lat.push(t.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32);
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    (
        all.len() as f64 / elapsed,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
    )
}

/// `redis-benchmark` running EVALSHA with the store's own arguments and
/// keys, `n` requests in all.
fn redis_benchmark(
    port: u16,
    callers: usize,
    store: &RedisStore,
    n: usize,
) -> Option<(f64, f64, f64)> {
    let args = store.script_args("__rand_int__", 1, None);
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &callers.to_string(), "-n", &n.max(5_000).to_string()])
        .args(["-r", &KEYS.to_string(), "--csv"])
        // The key's state and its ban key.
        .args(["EVALSHA", store.script_hash(), "2"])
        .args(&args)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
    // "p95_latency_ms","p99_latency_ms","max_latency_ms"
    let line = text.lines().last()?;
    let f: Vec<f64> = line
        .split(',')
        .skip(1)
        .filter_map(|v| v.trim_matches('"').parse().ok())
        .collect();
    (f.len() >= 6).then(|| (f[0], f[3] * 1000.0, f[5] * 1000.0))
}

fn key_of(k: u64) -> String {
    // redis-benchmark's __rand_int__ is 12 digits, zero-padded.
    format!("{k:012}")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median of each figure over the rounds.
fn medians(runs: &[(f64, f64, f64)]) -> (f64, f64, f64) {
    (
        median(runs.iter().map(|r| r.0).collect()),
        median(runs.iter().map(|r| r.1).collect()),
        median(runs.iter().map(|r| r.2).collect()),
    )
}

fn main() {
    let mut secs = 2.0;
    let mut rounds = 3;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--secs" => secs = it.next().and_then(|v| v.parse().ok()).unwrap_or(secs),
            "--rounds" => rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
            _ => {}
        }
    }
    let Some(server) = RedisServer::start() else {
        return;
    };
    let port = server.port;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    let algorithms: [(&str, AnyAlgorithm); 2] = [
        (
            "gcra",
            Gcra::new(100, Duration::from_secs(1)).unwrap().into(),
        ),
        (
            "sliding-window",
            SlidingWindow::new(100, Duration::from_secs(1))
                .unwrap()
                .into(),
        ),
    ];
    rt.block_on(async {
        for (name, algorithm) in algorithms {
            let store = RedisStore::builder(server.url(), algorithm)
                .prefix("bench:")
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap();
            store.ping().await.unwrap();
            for callers in CALLERS {
                // Rounds alternate between our client and redis-benchmark,
                // so both see the same machine load.
                let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    let s = store.clone();
                    let run = measure(callers, secs, move |k| {
                        let s = s.clone();
                        async move {
                            Store::<str>::check(&s, &key_of(k), 1, 0).await.unwrap();
                        }
                    })
                    .await;
                    eprintln!("{name} x{callers}: {run:?}");
                    if let Some(rb) =
                        redis_benchmark(port, callers, &store, (run.0 * secs) as usize)
                    {
                        eprintln!("redis-benchmark {name} x{callers}: {rb:?}");
                        theirs.push(rb);
                    }
                    ours.push(run);
                }
                let (rate, p50_us, p99_us) = medians(&ours);
                rows.push(Row {
                    what: format!("RedisStore, {name}"),
                    callers,
                    rate,
                    p50_us,
                    p99_us,
                });
                if !theirs.is_empty() {
                    let (rate, p50_us, p99_us) = medians(&theirs);
                    rows.push(Row {
                        what: format!("redis-benchmark, same script ({name})"),
                        callers,
                        rate,
                        p50_us,
                        p99_us,
                    });
                }
            }
        }
        let conn = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for callers in CALLERS {
            let mut runs = Vec::new();
            for _ in 0..rounds {
                let c = conn.clone();
                let run = measure(callers, secs, move |k| {
                    let mut c = c.clone();
                    async move {
                        let key = format!("naive:{}", key_of(k));
                        // Two commands, two round trips, every check.
                        let n: u64 = redis::cmd("INCR")
                            .arg(&key)
                            .query_async(&mut c)
                            .await
                            .unwrap();
                        let _: i64 = redis::cmd("EXPIRE")
                            .arg(&key)
                            .arg(1)
                            .arg("NX")
                            .query_async(&mut c)
                            .await
                            .unwrap();
                        std::hint::black_box(n <= 100);
                    }
                })
                .await;
                eprintln!("naive x{callers}: {run:?}");
                runs.push(run);
            }
            let (rate, p50_us, p99_us) = medians(&runs);
            rows.push(Row {
                what: "naive fixed window (INCR, then EXPIRE NX)".into(),
                callers,
                rate,
                p50_us,
                p99_us,
            });
        }
    });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "Medians of {rounds} rounds of {secs} s; load average at the end: {}",
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    println!();
    println!("| what | callers | checks/s | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} µs | {:.0} µs |",
            r.what, r.callers, r.rate, r.p50_us, r.p99_us
        );
    }
}
