//! The client against the axum example's app in process, both on tokio's
//! paused clock: 30 requests to the anonymous `GET /api/items` (10 per
//! minute per client IP, GCRA) take exactly what the limit allows.

use axum::extract::ConnectInfo;
use client_example::run;
use ratelimit_core::TokioClock;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::deploy::Limits;

#[tokio::test(start_paused = true)]
async fn thirty_requests_at_ten_per_minute_get_no_429_and_take_what_the_limit_allows() {
    let config = axum_example::Config {
        clock: Some(Arc::new(TokioClock::new())),
        ..axum_example::Config::default()
    };
    let limits = Limits::from_toml(axum_example::DEFAULT_POLICY, None, |_| None).unwrap();
    let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    let app = axum_example::app_on(&limits, &config).unwrap().map_request(
        move |mut req: http::Request<_>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req
        },
    );
    let uri = "http://127.0.0.1:3000/api/items".parse().unwrap();
    let report = run(app, uri, 30).await.unwrap();
    assert_eq!(report.requests, 30);
    assert!(report.limited <= 1, "{report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.sent, 30 + report.limited, "{report:?}");
    // A burst of 10, then one every 6 s: the 30th at 120 s. Within 10 %.
    let allowed = Duration::from_secs(120);
    let error = report.elapsed.abs_diff(allowed);
    assert!(error <= allowed / 10, "{report:?}");
    eprintln!("{report:?}");
}
