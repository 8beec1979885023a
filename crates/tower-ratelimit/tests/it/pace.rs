//! Bandwidth pacing: bodies yielded at the algorithm's rate (on the paused tokio clock), `after` bytes unpaced, dropped bodies, keys apart, store failures, one budget on Redis.

use crate::common::*;
use axum::body::{Body, Bytes};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use ratelimit_core::store::Upkeep;
use ratelimit_core::TokioClock;
use ratelimit_core::{Answer, Decision, MemoryStore, Store, StoreError, TokenBucket};
use ratelimit_redis::RedisStore;
use ratelimit_test_support::redis_server::RedisServer;
use std::future::Ready;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;
use tower_ratelimit::key::{Global, GlobalKey, IpKey, PeerIp};
use tower_ratelimit::pace::{PaceBuildError, PaceLayer, Paced};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
/// 256 KiB/s.
const RATE: u64 = 256 * KIB;
/// The bucket's burst, and the piece size.
const BURST: u64 = 16 * KIB;

fn bucket() -> TokenBucket {
    TokenBucket::new(BURST, RATE, SEC).unwrap()
}

/// The seconds `bytes` take at [`RATE`] after a full burst.
fn expected(bytes: u64) -> f64 {
    (bytes - BURST) as f64 / RATE as f64
}

fn assert_within_5_percent(took: Duration, expected: f64) {
    let took = took.as_secs_f64();
    assert!(
        (took - expected).abs() <= expected * 0.05,
        "took {took:.3} s, expected {expected:.3} s (within 5 %)"
    );
}

/// A store counting the bytes it admitted.
struct Counting<St> {
    inner: St,
    admitted: Arc<AtomicU64>,
}

impl<K, St: Store<K>> Store<K> for Counting<St> {
    type CheckFuture = St::CheckFuture;
    type WriteFuture = St::WriteFuture;

    fn check(
        &self,
        key: &K,
        cost: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        let result = match self.inner.check(key, cost, now).into_ready() {
            Ok(result) => result,
            Err(pending) => return Answer::pending(pending),
        };
        if let Ok(d) = &result {
            if d.allowed {
                self.admitted.fetch_add(cost, Ordering::SeqCst);
            }
        }
        Answer::ready(result)
    }

    fn refund(
        &self,
        key: &K,
        cost: u64,
        at: u64,
        now: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        self.inner.refund(key, cost, at, now)
    }
}

impl<St: Upkeep> Upkeep for Counting<St> {}

/// A store that always fails.
struct Down;

impl<K: ?Sized> Store<K> for Down {
    type CheckFuture = Ready<Result<Decision, StoreError>>;
    type WriteFuture = Ready<Result<(), StoreError>>;

    fn check(
        &self,
        _: &K,
        _: u64,
        _: u64,
    ) -> Answer<Result<Decision, StoreError>, Self::CheckFuture> {
        Answer::pending(std::future::ready(Err(StoreError::unavailable(
            "io",
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        ))))
    }

    fn refund(
        &self,
        _: &K,
        _: u64,
        _: u64,
        _: u64,
    ) -> Answer<Result<(), StoreError>, Self::WriteFuture> {
        Answer::pending(std::future::ready(Ok(())))
    }
}

impl Upkeep for Down {}

fn download(bytes: u64) -> Router {
    Router::new().route(
        "/download",
        get(move || async move { vec![7u8; bytes as usize] }),
    )
}

/// Reads the whole body: its length and how long it took.
async fn timed(app: &Router, req: axum::http::Request<Body>) -> (u64, Duration) {
    let start = Instant::now();
    let res = app.clone().oneshot(req).await.unwrap();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (body.len() as u64, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_download_goes_at_the_rate() {
    let layer = PaceLayer::builder("download", MemoryStore::new(bucket()), PeerIp::new(), BURST)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let (len, took) = timed(&app, get_from("203.0.113.7:1", "/download", &[])).await;
    assert_eq!(len, MIB);
    assert_within_5_percent(took, expected(MIB));
}

#[tokio::test(start_paused = true)]
async fn an_upload_goes_at_the_rate() {
    let layer = PaceLayer::builder("upload", MemoryStore::new(bucket()), Global, BURST)
        .paced(Paced::Requests)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let handler = |body: Bytes| async move { body.len().to_string() };
    let app = Router::new().route("/upload", post(handler)).layer(layer);
    let req = axum::http::Request::post("/upload")
        .body(Body::from(vec![1u8; (MIB / 2) as usize]))
        .unwrap();
    let start = Instant::now();
    let res = app.oneshot(req).await.unwrap();
    // The handler read the whole upload before answering.
    let took = start.elapsed();
    assert_eq!(body_string(res).await, (MIB / 2).to_string());
    assert_within_5_percent(took, expected(MIB / 2));
}

#[tokio::test(start_paused = true)]
async fn both_directions_share_one_budget() {
    let layer = PaceLayer::builder("both", MemoryStore::new(bucket()), Global, BURST)
        .paced(Paced::Both)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    // Echoes the upload: the key's budget carries it twice.
    let app = Router::new()
        .route("/echo", post(|body: Bytes| async move { body }))
        .layer(layer);
    let req = axum::http::Request::post("/echo")
        .body(Body::from(vec![1u8; (MIB / 2) as usize]))
        .unwrap();
    let (len, took) = timed(&app, req).await;
    assert_eq!(len, MIB / 2);
    assert_within_5_percent(took, expected(MIB));
}

#[tokio::test(start_paused = true)]
async fn the_first_bytes_after_go_unpaced() {
    let layer = PaceLayer::builder("download", MemoryStore::new(bucket()), Global, BURST)
        .after(MIB / 2)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let (len, took) = timed(&app, get_from("203.0.113.7:1", "/download", &[])).await;
    assert_eq!(len, MIB);
    assert_within_5_percent(took, expected(MIB / 2));
    // All of it unpaced: no wait at all.
    let (len, took) = timed(
        &download(MIB / 4).layer(
            PaceLayer::builder("small", MemoryStore::new(bucket()), Global, BURST)
                .after(MIB / 2)
                .clock(TokioClock::new())
                .build()
                .unwrap(),
        ),
        get_from("203.0.113.7:1", "/download", &[]),
    )
    .await;
    assert_eq!((len, took), (MIB / 4, Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_body_stops_charging() {
    let admitted = Arc::new(AtomicU64::new(0));
    let store = Counting {
        inner: MemoryStore::<_, GlobalKey>::new(bucket()),
        admitted: admitted.clone(),
    };
    let layer = PaceLayer::builder("download", store, Global, BURST)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let res = app
        .oneshot(get_from("203.0.113.7:1", "/download", &[]))
        .await
        .unwrap();
    let mut body = res.into_body();
    let mut received = 0;
    while received < MIB / 4 {
        let frame = body.frame().await.unwrap().unwrap();
        received += frame.into_data().unwrap().len() as u64;
    }
    drop(body);
    let charged = admitted.load(Ordering::SeqCst);
    assert_eq!(charged, received, "every charged piece was sent");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(admitted.load(Ordering::SeqCst), charged);
}

#[tokio::test(start_paused = true)]
async fn two_keys_are_paced_apart() {
    let layer = PaceLayer::builder("download", MemoryStore::new(bucket()), PeerIp::new(), BURST)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let (a, b) = tokio::join!(
        timed(&app, get_from("203.0.113.7:1", "/download", &[])),
        timed(&app, get_from("198.51.100.9:1", "/download", &[])),
    );
    assert_eq!((a.0, b.0), (MIB, MIB));
    assert_within_5_percent(a.1, expected(MIB));
    assert_within_5_percent(b.1, expected(MIB));
    // One key's two downloads at once share its budget.
    let (a, b) = tokio::join!(
        timed(&app, get_from("192.0.2.1:1", "/download", &[])),
        timed(&app, get_from("192.0.2.1:2", "/download", &[])),
    );
    assert_within_5_percent(a.1.max(b.1), expected(2 * MIB));
}

#[tokio::test(start_paused = true)]
async fn a_failing_store_lets_bodies_through() {
    let layer = PaceLayer::builder("download", Down, Global, BURST)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let (len, took) = timed(&app, get_from("203.0.113.7:1", "/download", &[])).await;
    assert_eq!((len, took), (MIB, Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn a_piece_above_the_capacity_is_cut_to_it() {
    let layer = PaceLayer::builder("download", MemoryStore::new(bucket()), Global, 4 * BURST)
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let app = download(MIB).layer(layer);
    let (len, took) = timed(&app, get_from("203.0.113.7:1", "/download", &[])).await;
    assert_eq!(len, MIB);
    assert_within_5_percent(took, expected(MIB));
}

#[tokio::test]
async fn a_key_error_is_answered_by_the_policy() {
    let store = MemoryStore::<_, IpKey>::new(bucket());
    let layer = PaceLayer::new("download", store, PeerIp::new(), BURST).unwrap();
    let app = download(KIB).layer(layer);
    // No peer address: the key error's 400.
    let req = axum::http::Request::get("/download")
        .body(Body::empty())
        .unwrap();
    let res = app.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 400);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let layer = |name: &str, piece| {
        PaceLayer::new(name, MemoryStore::new(bucket()), Global, piece).map(|_| ())
    };
    assert_eq!(layer("download", 0), Err(PaceBuildError::ZeroPiece));
    assert_eq!(
        layer("download", 1 << 30),
        Err(PaceBuildError::PieceTooLarge(1 << 30))
    );
    assert_eq!(
        layer("two words", 1),
        Err(PaceBuildError::BadName("two words".into()))
    );
    assert!(PaceBuildError::ZeroPiece.to_string().contains("0 bytes"));
}

/// Two layers (two instances of an app) on one redis-server share one
/// budget: two downloads of one key, one through each, take as long as
/// both bodies at the rate. Real time: Redis keeps its own clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_budget_across_two_instances_on_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // 1 MiB/s after 64 KiB.
    let bytes = TokenBucket::new(64 * KIB, MIB, SEC).unwrap();
    let instance = || {
        let store = RedisStore::builder(redis.url(), bytes)
            .prefix("pace-test")
            .build()
            .unwrap();
        download(MIB / 2).layer(PaceLayer::new("download", store, Global, 16 * KIB).unwrap())
    };
    let (a, b) = (instance(), instance());
    // Connect both stores first.
    timed(&a, get_from("203.0.113.7:1", "/download", &[])).await;
    timed(&b, get_from("203.0.113.7:1", "/download", &[])).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = std::time::Instant::now();
    let (x, y) = tokio::join!(
        timed(&a, get_from("203.0.113.7:1", "/download", &[])),
        timed(&b, get_from("203.0.113.7:1", "/download", &[])),
    );
    let took = start.elapsed().as_secs_f64();
    assert_eq!((x.0, y.0), (MIB / 2, MIB / 2));
    // Shared: (1 MiB - 64 KiB) at 1 MiB/s, 0.94 s; two budgets would take
    // 0.44 s.
    assert!(
        (0.8..3.0).contains(&took),
        "two instances took {took:.3} s for 1 MiB at 1 MiB/s"
    );
}
