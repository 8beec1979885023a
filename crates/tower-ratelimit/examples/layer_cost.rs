//! Nanoseconds per request through the layer, in process, without a
//! network: `cargo run --release -p tower-ratelimit --example layer_cost`.
//! Compares a bare service, the layer admitting everything, and the layer
//! rejecting everything (429 with headers and a problem+json body).

use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, Response};
use ratelimit_core::{Gcra, MemoryStore};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tower::{Layer, Service};
use tower_ratelimit::key::PeerIp;
use tower_ratelimit::RateLimitLayer;

fn run<S>(name: &str, mut svc: S, n: u32)
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    if std::env::args().nth(1).is_some_and(|only| only != name) {
        return;
    }
    let mut cx = Context::from_waker(Waker::noop());
    let peer: SocketAddr = "203.0.113.7:5000".parse().unwrap();
    let start = Instant::now();
    let mut ok = 0u32;
    for _ in 0..n {
        let mut req = Request::new(Body::empty());
        req.extensions_mut().insert(ConnectInfo(peer));
        let _ = svc.poll_ready(&mut cx);
        let mut fut = std::pin::pin!(svc.call(req));
        if let Poll::Ready(Ok(res)) = fut.as_mut().poll(&mut cx) {
            ok += u32::from(res.status() == 200);
            drop(res);
        }
    }
    let ns = start.elapsed().as_nanos() / u128::from(n);
    println!("{name:>8}: {ns:>5} ns/request ({ok} admitted)");
}

fn main() {
    let n = std::env::var("N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000_000);
    let inner = tower::service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("hello")))
    });
    let open = Gcra::with_burst(1_000_000_000, Duration::from_secs(1), 1_000_000_000).unwrap();
    let shut = Gcra::new(1, Duration::from_secs(3600)).unwrap();
    for _ in 0..2 {
        run("bare", inner, n);
        run(
            "admit",
            RateLimitLayer::new(MemoryStore::new(open), PeerIp::new()).layer(inner),
            n,
        );
        run(
            "limited",
            RateLimitLayer::new(MemoryStore::new(shut), PeerIp::new()).layer(inner),
            n,
        );
        let quiet = RateLimitLayer::builder(PeerIp::new())
            .limit("quiet", MemoryStore::new(open))
            .headers(tower_ratelimit::response::Headers::none())
            .build()
            .unwrap();
        run("no-hdrs", quiet.layer(inner), n);
    }
}
