//! Long keys: an app that looks a key up gets the key the client sent,
//! while the store keeps its digest.

use crate::common::*;
use axum::body::Body;
use axum::extract::Request;
use axum::routing::get;
use axum::Router;
use http::request::Parts;
use ratelimit_core::{Gcra, MemoryStore};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::{Bearer, HeaderKey, KeyExtractor};
use tower_ratelimit::strategy::Selection;
use tower_ratelimit::RateLimitLayer;

fn bearer(token: &str) -> Request<Body> {
    Request::get("/")
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap()
}

/// A plan lookup by the token sent, 200 bytes long, in the layer's
/// selection and in the handler (through the extractor).
#[tokio::test]
async fn a_200_byte_key_is_looked_up_by_the_text_sent() {
    let paid = format!("p{}", "x".repeat(199));
    let free = format!("f{}", "x".repeat(199));
    let plans: Arc<HashSet<String>> = Arc::new([paid.clone()].into());
    let layer = RateLimitLayer::builder(Bearer::new())
        .limit(
            "free",
            MemoryStore::new(Gcra::new(1, Duration::from_secs(60)).unwrap()),
        )
        .select(move |_: &Parts, key: &HeaderKey| {
            match key.sent().is_some_and(|t| plans.contains(t)) {
                true => Selection::NONE,
                false => Selection::ALL,
            }
        })
        .clock(|| 0)
        .build()
        .unwrap();
    let handler = |req: Request| async move {
        let key = Bearer::new().extract(&req.into_parts().0).unwrap();
        key.sent().unwrap_or("-").to_owned()
    };
    let app = Router::new().route("/", get(handler)).layer(layer);
    for _ in 0..3 {
        let res = app.clone().oneshot(bearer(&paid)).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(body_string(res).await, paid);
    }
    let res = app.clone().oneshot(bearer(&free)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(body_string(res).await, free);
    let res = app.clone().oneshot(bearer(&free)).await.unwrap();
    assert_eq!(res.status(), 429);
}
