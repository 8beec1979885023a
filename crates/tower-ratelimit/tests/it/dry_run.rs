//! Dry-run: record and set headers, never reject.

use crate::common::*;
use axum::extract::Extension;
use axum::routing::get;
use axum::Router;
use ratelimit_core::{Gcra, ManualClock, MemoryStore};
use tower::ServiceExt;
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::response::RATELIMIT;
use tower_ratelimit::strategy::Mode;
use tower_ratelimit::{RateLimitInfo, RateLimitLayer};

#[tokio::test]
async fn dry_run_never_rejects() {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("trial", MemoryStore::new(Gcra::new(1, 60 * SEC).unwrap()))
        .mode(Mode::DryRun)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/",
            get(|Extension(info): Extension<RateLimitInfo>| async move {
                format!("{} {}", info.is_allowed(), info.is_dry_run())
            }),
        )
        .layer(layer);
    let res = app
        .clone()
        .oneshot(get_from("10.0.0.1:1", "/", &[]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(body_string(res).await, "true false");
    for _ in 0..3 {
        let res = app
            .clone()
            .oneshot(get_from("10.0.0.1:1", "/", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers().get("retry-after").is_none());
        assert_eq!(res.headers()[RATELIMIT], "\"trial\";r=0;t=60");
        assert_eq!(body_string(res).await, "false true");
    }
}
