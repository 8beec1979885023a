//! Overload benchmark: one client flooding at 20 x a backend's capacity and
//! 10 polite clients, through no protection, a per-client rate limit, fair
//! queuing, adaptive concurrency, adaptive concurrency with fair queuing,
//! and fair queuing with a fixed limit 4 x too high.
//!
//! The backend (`ratelimit_test_support::backend`) takes 10 ms per request
//! up to 20 at once (2,000 requests a second) and slows down past that,
//! faster than the concurrency grows. It all runs on tokio's paused clock:
//! deterministic, and fast.
//!
//! ```text
//! cargo bench -p tower-ratelimit --bench overload -- --svg ../../docs/overload.svg
//! ```
//!
//! Prints a Markdown table (the one in BENCHMARKS.md) and, with `--svg
//! FILE`, draws goodput and polite success per setup as an SVG chart (cargo
//! runs benchmarks in their crate's directory: a relative `FILE` starts
//! there).

use http::request::Parts;
use http::StatusCode;
use ratelimit_core::TokioClock;
use ratelimit_test_support::backend::{self, req, Backend, BackendService};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};
use tower::ServiceExt;
use tower_layer::Layer;
use tower_ratelimit::fair::{AdaptiveLimit, FairQueueBuilder, FairQueueLayer};
use tower_ratelimit::key::KeyError;
use tower_ratelimit::{Gcra, MemoryStore, RateLimitLayer};

/// The simulated clients' key extractor: the `X-Client` header, a number.
type Key = fn(&Parts) -> Result<u32, KeyError>;

fn client(p: &Parts) -> Result<u32, KeyError> {
    backend::client(p).ok_or(KeyError::missing("X-Client header"))
}

const BASE: Duration = Duration::from_millis(10);
const CAPACITY: usize = 20;
/// The backend's best throughput, per second.
const CAPACITY_RATE: f64 = CAPACITY as f64 * 1000.0 / 10.0;
/// The flooder's requests per millisecond: 20 x the capacity.
const FLOOD_PER_MS: usize = 40;
const POLITE: u32 = 10;
/// Each polite client's interval between requests (10 a second).
const POLITE_EVERY: Duration = Duration::from_millis(100);
/// Clients give up after this.
const TIMEOUT: Duration = Duration::from_secs(1);
const WARMUP: Duration = Duration::from_secs(2);
const RUN: Duration = Duration::from_secs(10);
/// The adaptive limit's latency target: 1.3 x the unloaded latency.
const TARGET: Duration = Duration::from_millis(13);

#[derive(Default)]
struct Stats {
    polite_sent: usize,
    polite_ok: Vec<Duration>,
    flood_ok: usize,
}

struct Row {
    polite_success: f64,
    p50: Duration,
    p99: Duration,
    flood_share: f64,
    goodput: f64,
    backend_p99: Duration,
    limit: Option<usize>,
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p).div_ceil(100).max(1) - 1]
}

/// Sends one request of `client` (0 is the flooder), recording its outcome
/// if it was sent in the measured window.
fn send<S: BackendService>(svc: &S, client: u32, measured: bool, stats: &Arc<Mutex<Stats>>) {
    let svc = svc.clone();
    let stats = stats.clone();
    tokio::spawn(async move {
        let t = Instant::now();
        let res = tokio::time::timeout(TIMEOUT, svc.oneshot(req(client))).await;
        if !measured {
            return;
        }
        let ok = matches!(&res, Ok(Ok(r)) if r.status() == StatusCode::OK);
        let mut s = stats.lock().unwrap();
        match (client, ok) {
            (_, false) => {}
            (0, true) => s.flood_ok += 1,
            (_, true) => s.polite_ok.push(t.elapsed()),
        }
    });
}

async fn drive<S: BackendService>(svc: S, backend: Backend, limit: Option<AdaptiveLimit>) -> Row {
    let stats = Arc::new(Mutex::new(Stats::default()));
    let start = Instant::now();
    let (from, end) = (start + WARMUP, start + WARMUP + RUN);
    let mut tasks = Vec::new();
    {
        let (svc, stats) = (svc.clone(), stats.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
            loop {
                let at = tick.tick().await;
                if at >= end {
                    return;
                }
                for _ in 0..FLOOD_PER_MS {
                    send(&svc, 0, at >= from, &stats);
                }
            }
        }));
    }
    for p in 1..=POLITE {
        let (svc, stats) = (svc.clone(), stats.clone());
        let phase = POLITE_EVERY * p / (POLITE + 1);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(start + phase, POLITE_EVERY);
            loop {
                let at = tick.tick().await;
                if at >= end {
                    return;
                }
                if at >= from {
                    stats.lock().unwrap().polite_sent += 1;
                }
                send(&svc, p, at >= from, &stats);
            }
        }));
    }
    tokio::time::sleep_until(from).await;
    backend.latencies.lock().unwrap().clear();
    tokio::time::sleep_until(end).await;
    let limit = limit.map(|l| l.current());
    let mut backend_latencies = std::mem::take(&mut *backend.latencies.lock().unwrap());
    // Let the last requests answer or time out.
    tokio::time::sleep(TIMEOUT + Duration::from_millis(10)).await;
    for t in tasks {
        t.await.unwrap();
    }
    let s = stats.lock().unwrap();
    let mut polite = s.polite_ok.clone();
    polite.sort();
    backend_latencies.sort();
    let ok = s.flood_ok + polite.len();
    Row {
        polite_success: polite.len() as f64 / s.polite_sent.max(1) as f64,
        p50: percentile(&polite, 50),
        p99: percentile(&polite, 99),
        flood_share: if ok == 0 {
            0.0
        } else {
            s.flood_ok as f64 / ok as f64
        },
        goodput: ok as f64 / RUN.as_secs_f64() / CAPACITY_RATE,
        backend_p99: percentile(&backend_latencies, 99),
        limit,
    }
}

fn fair(concurrency: usize) -> FairQueueBuilder<Key> {
    FairQueueLayer::builder(client as Key)
        .concurrency(concurrency)
        .max_per_key(32)
        .max_total(256)
        .max_wait(TIMEOUT)
}

fn adaptive() -> AdaptiveLimit {
    AdaptiveLimit::builder(TARGET)
        .min(1)
        .max(1000)
        .initial(10)
        .build()
        .unwrap()
}

async fn setup(name: &str) -> Row {
    let backend = Backend::new(BASE, CAPACITY);
    let b = backend.clone();
    match name {
        "none" => drive(b, backend, None).await,
        "rate limit" => {
            // 150 a second per client: the capacity shared by 11 clients,
            // with room for bursts.
            let store = MemoryStore::new(Gcra::new(150, Duration::from_secs(1)).unwrap());
            let layer = RateLimitLayer::builder(client as Key)
                .limit("per-client", store)
                .clock(TokioClock::new())
                .build()
                .unwrap();
            drive(layer.layer(b), backend, None).await
        }
        "fair" => drive(fair(CAPACITY).build().unwrap().layer(b), backend, None).await,
        "fair 4x" => {
            let layer = fair(4 * CAPACITY).build().unwrap();
            drive(layer.layer(b), backend, None).await
        }
        "adaptive" => {
            let limit = adaptive();
            drive(limit.layer().layer(b), backend, Some(limit)).await
        }
        "adaptive + fair" => {
            let limit = adaptive();
            let layer = fair(CAPACITY).adaptive(limit.clone()).build().unwrap();
            drive(layer.layer(b), backend, Some(limit)).await
        }
        _ => unreachable!("{name}"),
    }
}

const SETUPS: [(&str, &str); 6] = [
    ("none", "no protection"),
    (
        "rate limit",
        "per-client rate limit (GCRA, 150/s per client)",
    ),
    ("fair", "fair queue, 20 at once (the capacity)"),
    ("fair 4x", "fair queue, 80 at once (4 x too high)"),
    (
        "adaptive",
        "adaptive concurrency (AIMD, 13 ms target), no queue",
    ),
    ("adaptive + fair", "adaptive concurrency + fair queue"),
];

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let svg = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--svg" => Some(path.clone()),
        _ => {
            eprintln!("usage: overload [--svg FILE]");
            std::process::exit(2);
        }
    };
    let mut rows = Vec::new();
    println!("| setup | polite success | polite p50 | polite p99 | flooder's share | goodput (of capacity) | backend p99 | limit at the end |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, label) in SETUPS {
        let r = rt.block_on(setup(name));
        println!(
            "| {label} | {:.1} % | {} | {} | {:.1} % | {:.1} % | {} | {} |",
            r.polite_success * 100.0,
            ms(r.p50),
            ms(r.p99),
            r.flood_share * 100.0,
            r.goodput * 100.0,
            ms(r.backend_p99),
            r.limit.map_or("-".to_owned(), |l| l.to_string()),
        );
        rows.push((name, r));
    }
    if let Some(path) = svg {
        if let Err(e) = chart(&rows, &path) {
            eprintln!("cannot draw {path}: {e}");
            std::process::exit(1);
        }
    }
}

/// Goodput and polite success per setup, as grouped bars.
fn chart(rows: &[(&str, Row)], path: &str) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    const GOODPUT: RGBColor = RGBColor(66, 133, 244);
    const POLITE: RGBColor = RGBColor(52, 168, 83);
    let root = SVGBackend::new(path, (900, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = rows.len() as f64;
    let mut c = ChartBuilder::on(&root)
        .caption(
            "One client flooding at 20 x capacity, 10 polite clients",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n, 0f64..125f64)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(rows.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 && i < rows.len() {
                rows[i].0.to_owned()
            } else {
                String::new()
            }
        })
        .y_labels(6)
        .light_line_style(WHITE)
        .y_desc("%")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (bar, color, value) in [
        (0, GOODPUT, (|r: &Row| r.goodput) as fn(&Row) -> f64),
        (1, POLITE, |r: &Row| r.polite_success),
    ] {
        let label = if bar == 0 {
            "goodput (of the backend's capacity)"
        } else {
            "polite requests served"
        };
        c.draw_series(rows.iter().enumerate().map(|(i, (_, r))| {
            let x = i as f64 + 0.12 + 0.38 * bar as f64;
            Rectangle::new([(x, 0.0), (x + 0.36, value(r) * 100.0)], color.filled())
        }))?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
