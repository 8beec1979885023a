//! Sends requests through [`ClientLayer`] and counts what happened: how
//! many requests the code made, how many went over the wire (retries
//! included), how many were answered `429`, and how long it all took.
//!
//! The layer has no limit of its own here: it learns the server's from the
//! `RateLimit` field (`r=0;t=6`: hold the next request 6 s), and obeys
//! `Retry-After` should a `429` come anyway.

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use ratelimit_async::client::ClientLayer;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

/// The errors of a run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Requests the code made.
    pub requests: u32,
    /// Requests sent over the wire, retries included.
    pub sent: u32,
    /// Responses `429 Too Many Requests` received (retried or not).
    pub limited: u32,
    /// Final responses that were not `2xx`.
    pub failed: u32,
    /// From the first request to the last response.
    pub elapsed: Duration,
}

/// Makes `n` `GET uri` requests one after another through
/// [`ClientLayer::new`] over `http` (hyper-util's client, or any tower
/// HTTP service), reading each body to the end.
pub async fn run<S, RB>(http: S, uri: Uri, n: u32) -> Result<Report, BoxError>
where
    S: Service<Request<Empty<Bytes>>, Response = Response<RB>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    RB: http_body::Body + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let sent = Arc::new(AtomicU32::new(0));
    let limited = Arc::new(AtomicU32::new(0));
    let counted = {
        let (sent, limited) = (sent.clone(), limited.clone());
        http.map_response(move |res: Response<RB>| {
            sent.fetch_add(1, Ordering::Relaxed);
            if res.status() == StatusCode::TOO_MANY_REQUESTS {
                limited.fetch_add(1, Ordering::Relaxed);
            }
            res
        })
    };
    let mut client = ClientLayer::new().layer(counted);
    let start = Instant::now();
    let mut failed = 0;
    for _ in 0..n {
        let req = Request::get(uri.clone()).body(Empty::new())?;
        let res = client.ready().await?.call(req).await?;
        if !res.status().is_success() {
            failed += 1;
        }
        res.into_body().collect().await.map_err(Into::into)?;
    }
    Ok(Report {
        requests: n,
        sent: sent.load(Ordering::Relaxed),
        limited: limited.load(Ordering::Relaxed),
        failed,
        elapsed: start.elapsed(),
    })
}
