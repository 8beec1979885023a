//! The hyper example of `tower-ratelimit`: plain hyper 1 + hyper-util, a
//! global limit and a per-IP limit, built with `tower::ServiceBuilder`.
//!
//! By default the global limit is GitHub's: 5,000 per hour in a fixed
//! window; the per-IP limit is a daily cap of 200 per day, whose windows
//! are offset per client ([`Anchor::KeyOffset`]) so that the clients'
//! windows don't all reset at the same instant.
//!
//! [`run`] serves it the way [`tower_ratelimit::serve`] hardens it for the
//! open internet.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use ratelimit_core::algorithm::Anchor;
use ratelimit_core::{FixedWindow, MemoryStore};
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;
use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;
use tower_ratelimit::key::{Global, IpKey, PeerAddr, PeerIp};
use tower_ratelimit::serve::{self, RequestBody, ServeOptions};
use tower_ratelimit::RateLimitLayer;

pub mod max_keys;
pub mod metrics;

/// The limits, each a fixed window: `global` per `global_window` for the
/// whole server, `per_ip` per `per_ip_window` per client IP.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests per window, all clients together (default 5,000).
    pub global: u64,
    /// The global window (default one hour).
    pub global_window: Duration,
    /// Requests per window per client IP, IPv6 per /64 (default 200).
    pub per_ip: u64,
    /// The per-IP window (default one day), offset per client.
    pub per_ip_window: Duration,
    /// The most client IPs the per-IP limit keeps state for (default
    /// [`max_keys::DEFAULT_MAX_KEYS`], `RATELIMIT_MAX_KEYS`).
    pub max_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            global: 5_000,
            global_window: Duration::from_secs(3_600),
            per_ip: 200,
            per_ip_window: Duration::from_secs(86_400),
            max_keys: max_keys::DEFAULT_MAX_KEYS,
        }
    }
}

/// The service type, for any request body.
pub type Service<B> = BoxCloneSyncService<Request<B>, Response<Full<Bytes>>, Infallible>;

/// The handler wrapped in both limits. Requests must carry the peer's
/// address as a [`PeerAddr`] extension (see [`run`]).
pub fn service<B: Send + 'static>(
    limits: Limits,
) -> Result<Service<B>, Box<dyn std::error::Error + Send + Sync>> {
    let global = RateLimitLayer::builder(Global)
        .limit(
            "global",
            MemoryStore::new(FixedWindow::new(limits.global, limits.global_window)?),
        )
        .build()?;
    // Outside the global limit: a client's own limit is given back when
    // the global one refuses it.
    let per_ip = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "per-ip",
            MemoryStore::<_, IpKey>::builder(
                FixedWindow::new(limits.per_ip, limits.per_ip_window)?
                    .with_anchor(Anchor::KeyOffset)?,
            )
            .max_keys(Some(limits.max_keys))
            .build()?,
        )
        .refund_on_inner_limit()
        .build()?;
    let svc = ServiceBuilder::new()
        .layer(per_ip)
        .layer(global)
        .service_fn(hello::<B>);
    Ok(BoxCloneSyncService::new(svc))
}

async fn hello<B>(req: Request<B>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.uri().path() {
        "/" => "hello from hyper\n",
        _ => {
            let mut res = Response::new(Full::from("not found\n"));
            *res.status_mut() = http::StatusCode::NOT_FOUND;
            return Ok(res);
        }
    };
    Ok(Response::new(Full::from(body)))
}

/// Serves `svc` on `listener` with [`serve::serve`] until `shutdown`
/// completes, tagging each request with the peer's address.
pub async fn run(
    listener: tokio::net::TcpListener,
    svc: Service<RequestBody>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let tagged = move |peer| {
        ServiceBuilder::new()
            .map_request(move |mut req: Request<RequestBody>| {
                req.extensions_mut().insert(PeerAddr(peer));
                req
            })
            .service(svc.clone())
    };
    serve::serve(listener, options, tagged, shutdown).await;
}
