//! `GET /reports` of the axum example under a flood, in process on tokio's
//! paused clock: one client holding 64 connections, polite clients sending
//! 1 request a second each.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::Router;
use axum_example::{app_on, Config};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

fn get_reports(peer: SocketAddr) -> Request<Body> {
    let mut req = Request::get("/reports").body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

/// Each response reaches the client 10 ms after the app answers it (a
/// network round trip; it also bounds the flood to 100 requests a second
/// per connection, so the test runs in seconds).
const RTT: Duration = Duration::from_millis(10);

#[derive(Default)]
struct Tally {
    polite: Vec<(StatusCode, Duration)>,
    flood: Vec<(StatusCode, Option<String>)>,
}

/// `connections` connections of one flooding client, each sending its next
/// request as soon as it has the answer to the last, and `polite` clients
/// each sending 1 request a second (their phases spread over the second),
/// for `run`.
async fn flood(app: Router, connections: usize, polite: usize, run: Duration) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = Instant::now() + run;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let (app, tally) = (app.clone(), tally.clone());
        let peer = SocketAddr::from(([198, 51, 100, 7], 10_000 + c as u16));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let res = app.clone().oneshot(get_reports(peer)).await.unwrap();
                let retry = res
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap().to_owned());
                tally.lock().unwrap().flood.push((res.status(), retry));
                tokio::time::sleep(RTT).await;
            }
        }));
    }
    for p in 0..polite {
        let (app, tally) = (app.clone(), tally.clone());
        let peer = SocketAddr::from(([203, 0, 113, 10 + p as u8], 40_000));
        let phase = Duration::from_millis(137 * p as u64 % 1000);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(Instant::now() + phase, Duration::from_secs(1));
            loop {
                let at = tick.tick().await;
                if at >= end {
                    return;
                }
                let res = app.clone().oneshot(get_reports(peer)).await.unwrap();
                tokio::time::sleep(RTT).await;
                tally
                    .lock()
                    .unwrap()
                    .polite
                    .push((res.status(), at.elapsed()));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap()
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[(latencies.len() * 99).div_ceil(100) - 1]
}

#[tokio::test(start_paused = true)]
async fn polite_clients_are_served_through_a_flood() {
    let limits =
        tower_ratelimit::deploy::Limits::from_toml(axum_example::DEFAULT_POLICY, None, |_| None);
    let app = app_on(&limits.unwrap(), &Config::default()).unwrap();
    // Unloaded: one request alone.
    let t = Instant::now();
    let res = app
        .clone()
        .oneshot(get_reports("203.0.113.99:1".parse().unwrap()))
        .await
        .unwrap();
    tokio::time::sleep(RTT).await;
    assert_eq!(res.status(), StatusCode::OK);
    let unloaded = t.elapsed();
    assert_eq!(unloaded, Duration::from_millis(110));

    let secs = 20;
    for (connections, polite) in [(64, 5), (200, 8)] {
        let tally = flood(app.clone(), connections, polite, Duration::from_secs(secs)).await;
        assert_eq!(tally.polite.len(), polite * secs as usize);
        assert!(
            tally.polite.iter().all(|(s, _)| *s == StatusCode::OK),
            "{connections} connections: {:?}",
            tally
                .polite
                .iter()
                .filter(|(s, _)| *s != StatusCode::OK)
                .collect::<Vec<_>>()
        );
        let p99 = p99(tally.polite.iter().map(|x| x.1).collect());
        assert!(
            p99 <= 3 * unloaded,
            "{connections} connections: p99 {p99:?}"
        );
        // The flood is served too, within its share, and refused with 429s
        // and Retry-After (its own queue is full), never 503s.
        let served = tally
            .flood
            .iter()
            .filter(|(s, _)| *s == StatusCode::OK)
            .count();
        // 4 places of 100 ms: 40 a second, less the polite requests.
        let capacity = 40 * secs as usize;
        assert!(served >= capacity - polite * secs as usize - 10, "{served}");
        for (s, retry) in &tally.flood {
            match *s {
                StatusCode::OK => {}
                StatusCode::TOO_MANY_REQUESTS => assert!(retry.is_some()),
                other => panic!("flooder got {other}"),
            }
        }
    }
}
