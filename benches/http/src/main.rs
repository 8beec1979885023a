//! `http-bench MODE PORT`: serves `GET /` ("hello") on 127.0.0.1:PORT,
//! bare or behind a rate limiter, for ./run.sh to load with wrk.
//!
//! A mode is a limiter, then optional suffixes:
//! - `bare`: no layer; `bare-headers`: no layer, the handler sends the two
//!   `RateLimit` fields that `ours` adds; `noop`: a layer that does nothing (what axum's
//!   wrapping of a layered route costs by itself); `ours`: tower-ratelimit;
//!   `ours-quiet`: tower-ratelimit without rate-limit headers on admitted
//!   responses; `governor`: tower_governor.
//! - `ours-draining`: admits everything, with `r` changing on every
//!   response (each request takes a token that comes back after 1 ms).
//! - `ours-costed`: `ours` with a handler that sends `x-tokens-used: 3`
//!   (and nothing settles it); `ours-settled`: the same, with the layer
//!   settling each request's reservation of 1 to those 3 (`settle`, a
//!   response header): what settling costs.
//! - `-limited`: one per minute with a burst of 10, so all but the first
//!   few requests get 429; without it everything is admitted (1 per ns,
//!   burst 10^9).
//!
//! Built with `--features outer`, the layer wraps the whole `Router` (a
//! `tower::Layer` around a service) instead of going in with
//! `Router::layer`. The two are separate builds, so that each binary holds
//! one way of serving, as a real app would.
//!
//! Both limiters key on the peer IP and send rate-limit headers on every
//! response (but `ours-quiet`).

use axum::extract::Request;
use axum::response::Response;
use axum::{routing::get, Router, ServiceExt};
use governor::middleware::StateInformationMiddleware;
use ratelimit_core::{Gcra, MemoryStore};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tower_governor::{
    governor::GovernorConfigBuilder, key_extractor::PeerIpKeyExtractor, GovernorLayer,
};
use tower_layer::Layer;
use tower_ratelimit::response::Headers;
use tower_ratelimit::{key::PeerIp, RateLimitLayer};
use tower_service::Service;

/// The app, with its routes made ready up front (as
/// `Router::into_make_service_with_connect_info` does) rather than on every
/// request.
fn app() -> Router {
    if std::env::args()
        .nth(1)
        .is_some_and(|m| m.contains("-costed") || m.contains("-settled"))
    {
        return Router::new()
            .route("/", get(|| async { ([("x-tokens-used", "3")], "hello") }))
            .with_state(());
    }
    Router::new()
        .route("/", get(|| async { "hello" }))
        .with_state(())
}

/// The bare app sending, from the handler, the same two `RateLimit` fields
/// that tower-ratelimit adds to an admitted response here: what the fields
/// cost the server and the client, with no limiter at all.
fn bare_headers() -> Router {
    use axum::http::{HeaderName, HeaderValue};
    let fields = [
        (
            HeaderName::from_static("ratelimit-policy"),
            HeaderValue::from_static("\"default\";q=1000000000;w=1"),
        ),
        (
            HeaderName::from_static("ratelimit"),
            HeaderValue::from_static("\"default\";r=999999999;t=1"),
        ),
    ];
    Router::new()
        .route("/", get(move || async move { (fields.clone(), "hello") }))
        .with_state(())
}

/// `burst` per `burst * interval`, as our store's GCRA.
fn quota(interval: Duration, burst: u32) -> Gcra {
    let per_second = 1_000_000_000 / interval.as_nanos() as u64;
    if per_second > 0 {
        Gcra::with_burst(per_second, Duration::from_secs(1), u64::from(burst))
    } else {
        Gcra::with_burst(1, interval, u64::from(burst))
    }
    .expect("valid quota")
}

/// `burst` per `burst * interval`, for both limiters alike.
fn ours(
    interval: Duration,
    burst: u32,
    headers: Headers,
) -> RateLimitLayer<PeerIp, MemoryStore<Gcra, tower_ratelimit::key::IpKey>> {
    RateLimitLayer::builder(PeerIp::new())
        .limit("default", MemoryStore::new(quota(interval, burst)))
        .headers(headers)
        .build()
        .expect("valid layer")
}

/// [`ours`] settling each request to the cost read `from` the response.
fn settled(
    interval: Duration,
    burst: u32,
    from: tower_ratelimit::CostFrom,
) -> RateLimitLayer<PeerIp, MemoryStore<Gcra, tower_ratelimit::key::IpKey>> {
    RateLimitLayer::builder(PeerIp::new())
        .limit("default", MemoryStore::new(quota(interval, burst)))
        .settle(from)
        .build()
        .expect("valid layer")
}

fn governor(
    interval: Duration,
    burst: u32,
) -> GovernorLayer<PeerIpKeyExtractor, StateInformationMiddleware, axum::body::Body> {
    let config = GovernorConfigBuilder::<PeerIpKeyExtractor, _>::default()
        .period(interval)
        .burst_size(burst)
        .use_headers()
        .finish()
        .expect("valid quota");
    GovernorLayer::new(config)
}

/// A layer that does nothing.
#[derive(Clone)]
struct Noop;

impl<S> Layer<S> for Noop {
    type Service = S;
    fn layer(&self, inner: S) -> S {
        inner
    }
}

/// Serves `svc` with the peer address in the request extensions.
async fn serve<S>(svc: S, port: u16)
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    axum::serve(
        listener,
        svc.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serve");
}

/// Serves the app with `layer` added by `Router::layer`.
#[cfg(not(feature = "outer"))]
async fn run<L>(layer: L, port: u16)
where
    L: Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
    L::Service: Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
    <L::Service as Service<Request>>::Response: axum::response::IntoResponse + 'static,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
    serve(app().layer(layer).with_state(()), port).await
}

/// Serves the app with `layer` around the whole `Router`.
#[cfg(feature = "outer")]
async fn run<L>(layer: L, port: u16)
where
    L: Layer<Router>,
    L::Service: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    <L::Service as Service<Request>>::Future: Send,
{
    serve(layer.layer(app()), port).await
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, port) = match args.as_slice() {
        [_, mode, port] => (mode.as_str(), port.parse::<u16>().expect("port")),
        _ => {
            eprintln!(
                "usage: http-bench bare|bare-headers|noop|ours|ours-quiet|governor[-limited] PORT"
            );
            std::process::exit(2);
        }
    };
    let (limiter, (interval, burst)) = match mode.strip_suffix("-limited") {
        Some(m) => (m, (Duration::from_secs(60), 10)),
        None => (mode, (Duration::from_nanos(1), 1_000_000_000)),
    };
    match limiter {
        "bare" => serve(app(), port).await,
        "bare-headers" => serve(bare_headers(), port).await,
        "noop" => run(Noop, port).await,
        "ours" => run(ours(interval, burst, Headers::new()), port).await,
        // Admits everything too, but each request takes a token that comes
        // back only after a millisecond: `r` changes on every response.
        "ours-draining" => {
            run(
                ours(Duration::from_millis(1), 1_000_000_000, Headers::new()),
                port,
            )
            .await
        }
        "ours-quiet" => {
            run(
                ours(interval, burst, Headers::new().on_allowed(false)),
                port,
            )
            .await
        }
        "ours-costed" => run(ours(interval, burst, Headers::new()), port).await,
        "ours-settled" => {
            let from = "response-header:x-tokens-used".parse().expect("cost-from");
            run(settled(interval, burst, from), port).await
        }
        "governor" => run(governor(interval, burst), port).await,
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    }
}
