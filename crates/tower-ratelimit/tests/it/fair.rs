//! The fair queue and the adaptive limit, on tokio's paused clock.

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use ratelimit_test_support::backend::{self, req, Backend, BackendService};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tower_ratelimit::fair::{AdaptiveLimit, FairQueue, FairQueueLayer};
use tower_ratelimit::key::KeyError;

/// The simulated clients' key extractor: the `X-Client` header, a number.
type Key = fn(&Parts) -> Result<u32, KeyError>;

fn client(p: &Parts) -> Result<u32, KeyError> {
    backend::client(p).ok_or(KeyError::missing("X-Client header"))
}

fn queue(c: usize, per_key: usize, total: usize) -> FairQueueLayer<Key> {
    FairQueueLayer::builder(client as Key)
        .concurrency(c)
        .max_per_key(per_key)
        .max_total(total)
        .max_wait(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Completions per client: `workers[i]` requests of client `i` kept in
/// flight for `run` (after `warmup`); a refused request is retried after
/// 1 ms (a client's round trip).
async fn closed_loop<S: BackendService>(
    svc: S,
    workers: &[usize],
    warmup: Duration,
    run: Duration,
) -> Vec<usize> {
    let counts = Arc::new(Mutex::new(vec![0usize; workers.len()]));
    let start = Instant::now() + warmup;
    let end = start + run;
    let mut tasks = Vec::new();
    for (c, &n) in workers.iter().enumerate() {
        for _ in 0..n {
            let svc = svc.clone();
            let counts = counts.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let res = svc.clone().oneshot(req(c as u32)).await.unwrap();
                    let now = Instant::now();
                    if now >= end {
                        return;
                    }
                    if res.status() == StatusCode::OK {
                        if now >= start {
                            counts.lock().unwrap()[c] += 1;
                        }
                    } else {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let v = counts.lock().unwrap().clone();
    v
}

fn assert_fair(counts: &[usize], tolerance: f64) {
    let total: usize = counts.iter().sum();
    let fair = total as f64 / counts.len() as f64;
    for (i, &n) in counts.iter().enumerate() {
        let off = (n as f64 - fair).abs() / fair;
        assert!(
            off <= tolerance,
            "client {i} got {n} of {total} ({counts:?}): {:.1} % off its 1/{} share",
            off * 100.0,
            counts.len()
        );
    }
}

/// k busy clients each get 1/k of the places within 2 %, however many
/// requests each keeps outstanding (all at least its share).
#[tokio::test(start_paused = true)]
async fn busy_keys_share_equally() {
    for workers in [
        vec![8, 8, 8, 8],
        vec![40, 8, 3, 2],
        vec![64, 2, 2, 2, 2, 2, 2, 2],
    ] {
        let backend = Backend::new(Duration::from_millis(10), 100);
        let svc = queue(4, 8, 64).layer(backend.clone());
        let counts = closed_loop(
            svc,
            &workers,
            Duration::from_secs(1),
            Duration::from_secs(10),
        )
        .await;
        // 4 places, 10 ms each, 10 s: 4,000 completions.
        let total: usize = counts.iter().sum();
        assert!((3_990..=4_000).contains(&total), "{total}");
        assert_fair(&counts, 0.02);
        assert!(backend.peak.load(Ordering::SeqCst) <= 4);
    }
}

/// Without the queue, the client with most connections takes most places.
#[tokio::test(start_paused = true)]
async fn without_the_queue_the_flood_wins() {
    let backend = Backend::new(Duration::from_millis(10), 100);
    let counts = closed_loop(backend, &[40, 2], Duration::ZERO, Duration::from_secs(1)).await;
    assert!(counts[0] > 10 * counts[1], "{counts:?}");
}

fn retry_after(res: &Response<Bytes>) -> u64 {
    res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn bounds_per_key_and_in_total() {
    let backend = Backend::new(Duration::from_secs(1), 100);
    let mut svc = queue(1, 2, 3).layer(backend);
    let running = svc.call(req(0));
    let a1 = svc.call(req(1));
    let a2 = svc.call(req(1));
    // Client 1's queue is full: 429, as the rate limit answers.
    let full = svc.call(req(1)).await.unwrap();
    assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&full) >= 1);
    assert_eq!(full.headers()["content-type"], "application/problem+json");
    let body = std::str::from_utf8(full.body()).unwrap();
    assert!(body.contains("\"limit\":\"fair-queue\""), "{body}");
    let b1 = svc.call(req(2));
    // The whole queue is full: 503, for any client.
    for c in [3, 4, 1] {
        let res = svc.call(req(c)).await.unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "client {c}");
        assert!(retry_after(&res) >= 1);
    }
    assert_eq!(
        (svc.in_flight(), svc.queued(), svc.queued_keys()),
        (1, 3, 2)
    );
    // No key: the key error's 400.
    let res = svc.call(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    // Served in turn: 0, then 1, 2, 1.
    let t = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, f) in [("0", running), ("a1", a1), ("a2", a2), ("b1", b1)] {
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            assert_eq!(f.await.unwrap().status(), StatusCode::OK);
            order.lock().unwrap().push((name, t.elapsed().as_secs()));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        [("0", 1), ("a1", 2), ("b1", 3), ("a2", 4)]
    );
    assert_eq!(
        (svc.in_flight(), svc.queued(), svc.queued_keys()),
        (0, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn waiting_past_the_deadline_is_a_503() {
    let backend = Backend::new(Duration::from_secs(5), 100);
    let layer = FairQueueLayer::builder(client as Key)
        .concurrency(1)
        .max_wait(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut svc = layer.layer(backend);
    let running = tokio::spawn(svc.call(req(0)));
    let t = Instant::now();
    let res = svc.call(req(1)).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_secs(2));
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&res) >= 1);
    assert_eq!(svc.queued(), 0);
    assert_eq!(running.await.unwrap().unwrap().status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_frees_its_place_at_once() {
    let backend = Backend::new(Duration::from_secs(1), 100);
    let mut svc = queue(1, 2, 64).layer(backend.clone());
    let running = svc.call(req(0));
    let a1 = svc.call(req(1));
    let a2 = svc.call(req(1));
    assert_eq!(
        svc.call(req(1)).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Dropped before it was ever polled: its place is free at once.
    drop(a1);
    assert_eq!((svc.queued(), svc.queued_keys()), (1, 1));
    let a3 = svc.call(req(1));
    assert_eq!(svc.queued(), 2);
    // Dropped while waiting (polled, so registered): the same.
    let mut a2 = Box::pin(a2);
    assert!(futures_poll(&mut a2).is_none());
    drop(a2);
    drop(a3);
    assert_eq!((svc.queued(), svc.queued_keys()), (0, 0));
    // Granted, then dropped before it ran: the place goes to the next.
    let b = svc.call(req(2));
    let c = svc.call(req(3));
    assert_eq!(running.await.unwrap().status(), StatusCode::OK);
    assert_eq!((svc.in_flight(), svc.queued()), (1, 1)); // b granted, c waiting
    drop(b);
    assert_eq!((svc.in_flight(), svc.queued()), (1, 0)); // c granted
    let t = Instant::now();
    assert_eq!(c.await.unwrap().status(), StatusCode::OK);
    assert_eq!(t.elapsed(), Duration::from_secs(1));
    assert_eq!(backend.done.load(Ordering::SeqCst), 2);
    assert_eq!((svc.in_flight(), svc.queued()), (0, 0));
}

/// Polls `f` once.
fn futures_poll<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// A flood of distinct keys holds at most the total queue length of keys,
/// and its refusals cost nothing: they are 503s.
#[tokio::test(start_paused = true)]
async fn a_key_flood_is_bounded() {
    let backend = Backend::new(Duration::from_secs(1), 100);
    let mut svc = queue(2, 4, 100).layer(backend);
    let mut held = Vec::new();
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    for c in 0..10_000 {
        let mut f = svc.call(req(c));
        match futures_poll(&mut f) {
            Some(res) => *statuses.entry(res.unwrap().status().as_u16()).or_default() += 1,
            None => held.push(f),
        }
    }
    assert_eq!(held.len(), 102);
    assert_eq!(statuses[&503], 9_898);
    assert_eq!(svc.queued_keys(), 100);
    drop(held);
    assert_eq!(
        (svc.in_flight(), svc.queued(), svc.queued_keys()),
        (0, 0, 0)
    );
}

/// The adaptive limit settles near the backend's capacity: goodput at 90 %
/// of it or more, the backend's p99 latency within the target, from below
/// and from above, and with a target loose enough to allow a collapse; a
/// fixed limit 4 x too high collapses to under half of it.
#[tokio::test(start_paused = true)]
async fn adaptive_limit_converges_on_the_capacity() {
    let base = Duration::from_millis(10);
    let capacity = 20;
    let max_rate = capacity as f64 / base.as_secs_f64(); // 2,000/s
    let (warmup, run) = (Duration::from_secs(5), Duration::from_secs(20));
    for (initial, target) in [(1, 1.3), (100, 1.3), (10, 1.1), (10, 5.0)] {
        let target = base.mul_f64(target);
        let backend = Backend::new(base, capacity);
        let limit = AdaptiveLimit::builder(target)
            .min(1)
            .max(200)
            .initial(initial)
            .build()
            .unwrap();
        let layer = FairQueueLayer::builder(client as Key)
            .adaptive(limit.clone())
            .max_per_key(32)
            .max_total(128)
            .build()
            .unwrap();
        let svc = layer.layer(backend.clone());
        let latencies = backend.latencies.clone();
        tokio::spawn(async move {
            tokio::time::sleep(warmup).await;
            latencies.lock().unwrap().clear();
        });
        let counts = closed_loop(svc, &[32, 32, 32], warmup, run).await;
        let goodput = counts.iter().sum::<usize>() as f64 / run.as_secs_f64();
        let current = limit.current();
        let case = format!("from {initial}, target {target:?}: limit {current}");
        assert!(
            goodput >= 0.9 * max_rate,
            "{case}: goodput {goodput}/s of {max_rate}/s"
        );
        assert!((capacity..=capacity * 13 / 10).contains(&current), "{case}");
        let mut latencies = std::mem::take(&mut *backend.latencies.lock().unwrap());
        latencies.sort();
        let p99 = latencies[latencies.len() * 99 / 100];
        assert!(p99 <= target, "{case}: p99 {p99:?}");
        assert_fair(&counts, 0.02);
    }
    // A fixed limit of 4 x the capacity.
    let backend = Backend::new(base, capacity);
    let svc = queue(4 * capacity, 32, 128).layer(backend);
    let counts = closed_loop(svc, &[32, 32, 32], Duration::from_secs(5), run).await;
    let goodput = counts.iter().sum::<usize>() as f64 / run.as_secs_f64();
    assert!(goodput < 0.5 * max_rate, "{goodput}");
}

/// The adaptive layer alone: a concurrency limit answering 503 at once.
#[tokio::test(start_paused = true)]
async fn adaptive_layer_refuses_past_its_limit() {
    let limit = AdaptiveLimit::builder(Duration::from_secs(10))
        .min(2)
        .max(2)
        .build()
        .unwrap();
    let mut svc = limit
        .layer()
        .layer(Backend::new(Duration::from_secs(1), 100));
    let a = svc.call(req(0));
    let b = svc.call(req(0));
    let c = svc.call(req(0)).await.unwrap();
    assert_eq!(c.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&c) >= 1);
    assert_eq!(a.await.unwrap().status(), StatusCode::OK);
    assert_eq!(b.await.unwrap().status(), StatusCode::OK);
    assert_eq!(svc.call(req(0)).await.unwrap().status(), StatusCode::OK);
}

#[test]
fn layer_and_service_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync>() {}
    check::<FairQueueLayer<Key>>();
    check::<FairQueue<Backend, Key, tower_ratelimit::response::ProblemJson>>();
}
