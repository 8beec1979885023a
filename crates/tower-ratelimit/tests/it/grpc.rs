//! gRPC rejections (`response::Grpc`), keys from metadata and from tonic's
//! `TcpConnectInfo` (feature `grpc`).

use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use ratelimit_core::{Gcra, ManualClock, MemoryStore, Store, StoreError};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpConnectInfo;
use tonic::{Code, Status};
use tonic_types::StatusExt;
use tower::util::BoxCloneService;
use tower::{service_fn, ServiceExt};
use tower_ratelimit::key::{ApiKey, Bearer, Header, KeyError, KeyExtractor, PeerIp};
use tower_ratelimit::response::{Grpc, Rejection, ResponseBuilder, RATELIMIT, RATELIMIT_POLICY};
use tower_ratelimit::RateLimitLayer;

const MINUTE: Duration = Duration::from_secs(60);

/// A gRPC call to `/demo.Echo/Say` from `peer` as tonic's server hands it
/// to its layers, with `metadata`.
fn call(peer: &str, metadata: MetadataMap) -> Request<Body> {
    let mut req = Request::post("http://localhost/demo.Echo/Say")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::empty())
        .unwrap();
    req.headers_mut().extend(metadata.into_headers());
    let remote: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(TcpConnectInfo {
        local_addr: Some(([127, 0, 0, 1], 50051).into()),
        remote_addr: Some(remote),
    });
    req
}

fn from(peer: &str) -> Request<Body> {
    call(peer, MetadataMap::new())
}

/// A service answering every call with an OK trailers-only response.
fn ok(
) -> impl tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
       + Clone
       + Send
       + 'static {
    service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(Status::ok("").into_http::<Body>())
    })
}

type Svc = BoxCloneService<Request<Body>, Response<Body>, Infallible>;

/// `key` limited to 5 calls per minute on `clock`, answered by [`Grpc`].
fn limited<X>(key: X, clock: &ManualClock) -> Svc
where
    X: KeyExtractor,
    X::Key: std::hash::Hash,
    MemoryStore<Gcra, X::Key>: Store<X::Key>,
    <MemoryStore<Gcra, X::Key> as Store<X::Key>>::CheckFuture: Unpin,
    <MemoryStore<Gcra, X::Key> as Store<X::Key>>::WriteFuture: Unpin,
{
    let layer = RateLimitLayer::builder(key)
        .limit("calls", MemoryStore::new(Gcra::new(5, MINUTE).unwrap()))
        .clock(clock.clone())
        .response(Grpc::new())
        .build()
        .unwrap();
    BoxCloneService::new(tower::Layer::layer(&layer, ok()))
}

async fn send(svc: &Svc, req: Request<Body>) -> Response<Body> {
    svc.clone().oneshot(req).await.unwrap()
}

fn code(res: &Response<Body>) -> Code {
    assert_eq!(res.status(), 200, "gRPC answers are HTTP 200");
    Status::from_header_map(res.headers())
        .expect("a grpc-status")
        .code()
}

#[tokio::test]
async fn the_sixth_call_is_resource_exhausted_with_retry_info() {
    let clock = ManualClock::new();
    let svc = limited(PeerIp::new(), &clock);
    for _ in 0..5 {
        let res = send(&svc, from("203.0.113.7:4000")).await;
        assert_eq!(code(&res), Code::Ok);
        assert!(res.headers().contains_key(RATELIMIT));
    }
    clock.advance(Duration::from_millis(500));
    let res = send(&svc, from("203.0.113.7:4001")).await;
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "application/grpc");
    assert_eq!(h["grpc-status"], "8");
    // Percent-encoded as the gRPC spec asks: spaces and quotes.
    assert_eq!(
        h["grpc-message"],
        "Rate%20limit%20%22calls%22%20exceeded:%20retry%20in%2012%20seconds."
    );
    // Base64 without padding.
    let details = h["grpc-status-details-bin"].to_str().unwrap();
    assert!(!details.contains('='), "{details}");
    let status = Status::from_header_map(&h).unwrap();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "Rate limit \"calls\" exceeded: retry in 12 seconds."
    );
    let retry = status.get_details_retry_info().expect("RetryInfo");
    // The exact wait: one slot every 12 s, 0.5 s of it gone.
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(11_500)));
    // The IETF fields beside the status, in the same (only) header block.
    assert_eq!(h["retry-after"], "12");
    assert_eq!(h[RATELIMIT_POLICY], "\"calls\";q=5;w=60");
    assert_eq!(h[RATELIMIT], "\"calls\";r=0;t=12");
    // A valid trailers-only response: nothing in the body.
    let body = res.into_body().collect().await.unwrap();
    assert!(body.trailers().is_none());
    assert!(body.to_bytes().is_empty());

    // Keyed by tonic's peer address: another client is served...
    let other = send(&svc, from("198.51.100.1:4000")).await;
    assert_eq!(code(&other), Code::Ok);
    // ...and the first one again after the wait, not before.
    clock.advance(Duration::from_millis(11_499));
    let res = send(&svc, from("203.0.113.7:4002")).await;
    assert_eq!(code(&res), Code::ResourceExhausted);
    clock.advance(Duration::from_millis(1));
    let res = send(&svc, from("203.0.113.7:4003")).await;
    assert_eq!(code(&res), Code::Ok);
}

#[tokio::test]
async fn a_wait_under_a_second_is_retry_in_1_second() {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit(
            "calls",
            MemoryStore::new(Gcra::with_burst(10, Duration::from_secs(1), 1).unwrap()),
        )
        .clock(ManualClock::new())
        .response(Grpc::new())
        .build()
        .unwrap();
    let svc: Svc = BoxCloneService::new(tower::Layer::layer(&layer, ok()));
    assert_eq!(code(&send(&svc, from("203.0.113.7:1")).await), Code::Ok);
    let res = send(&svc, from("203.0.113.7:1")).await;
    let status = Status::from_header_map(res.headers()).unwrap();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().ends_with("retry in 1 second."));
    let retry = status.get_details_retry_info().unwrap();
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(100)));
}

#[tokio::test]
async fn keys_from_metadata() {
    let clock = ManualClock::new();
    let mut metadata = MetadataMap::new();
    metadata.insert("x-api-key", "key-1".parse().unwrap());
    metadata.insert("authorization", "Bearer tok-1".parse().unwrap());
    metadata.insert("x-tenant", "acme".parse().unwrap());
    let api = limited(ApiKey::new(), &clock);
    let bearer = limited(Bearer::new(), &clock);
    let tenant = limited("x-tenant".parse::<Header>().unwrap(), &clock);
    for svc in [&api, &bearer, &tenant] {
        for _ in 0..5 {
            let res = send(svc, call("203.0.113.7:1", metadata.clone())).await;
            assert_eq!(code(&res), Code::Ok);
        }
        // Each limit counted its key, whatever the peer: the sixth is
        // refused.
        let res = send(svc, call("198.51.100.1:1", metadata.clone())).await;
        assert_eq!(code(&res), Code::ResourceExhausted);
    }
    // Another key in the metadata is another client.
    let mut other = MetadataMap::new();
    other.insert("x-api-key", "key-2".parse().unwrap());
    let res = send(&api, call("203.0.113.7:1", other)).await;
    assert_eq!(code(&res), Code::Ok);
}

#[tokio::test]
async fn key_errors_are_grpc_statuses() {
    let clock = ManualClock::new();
    // No token: UNAUTHENTICATED, with the challenge.
    let res = send(&limited(Bearer::new(), &clock), from("203.0.113.7:1")).await;
    assert_eq!(code(&res), Code::Unauthenticated);
    assert_eq!(res.headers()["www-authenticate"], "Bearer");
    let status = Status::from_header_map(res.headers()).unwrap();
    assert_eq!(status.message(), "Missing bearer token.");
    // A malformed key: INVALID_ARGUMENT.
    let mut bad = MetadataMap::new();
    bad.insert("x-api-key", "a b".parse().unwrap());
    let res = send(&limited(ApiKey::new(), &clock), call("203.0.113.7:1", bad)).await;
    assert_eq!(code(&res), Code::InvalidArgument);
    // No peer address (not served by tonic over TCP): INVALID_ARGUMENT.
    let mut req = from("203.0.113.7:1");
    req.extensions_mut().remove::<TcpConnectInfo>();
    let res = send(&limited(PeerIp::new(), &clock), req).await;
    assert_eq!(code(&res), Code::InvalidArgument);
    // A 403 from a custom extractor: PERMISSION_DENIED.
    let e = KeyError::missing("tenant").with_status(http::StatusCode::FORBIDDEN);
    let res: Response<Body> = Grpc::new().build(Rejection::KeyError(&e));
    assert_eq!(code(&res), Code::PermissionDenied);
}

#[test]
fn other_rejections() {
    let down = StoreError::unavailable("io", "connection refused");
    let res: Response<Body> = Grpc::new().build(Rejection::Unavailable(&down));
    assert_eq!(code(&res), Code::Unavailable);
    assert!(!res.headers().contains_key("grpc-status-details-bin"));
    // The builder works for any body with a default, and outside a layer.
    let info = Default::default();
    let res: Response<String> = Grpc::new().build(Rejection::Limited(&info));
    let h: &HeaderMap = res.headers();
    assert_eq!(h["grpc-status"], "8");
    assert!(res.body().is_empty());
}

#[tokio::test]
async fn a_call_that_can_never_fit_has_no_retry_info() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("calls", MemoryStore::new(Gcra::new(5, MINUTE).unwrap()))
        .cost(|_: &http::request::Parts| 6)
        .clock(clock)
        .response(Grpc::new())
        .build()
        .unwrap();
    let res = tower::Layer::layer(&layer, ok())
        .oneshot(from("203.0.113.7:1"))
        .await
        .unwrap();
    let status = Status::from_header_map(res.headers()).unwrap();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.get_details_retry_info().is_none());
    assert!(
        status.message().contains("can never be admitted"),
        "{}",
        status.message()
    );
    assert!(!res.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn a_banned_call_says_it_is_a_ban() {
    let clock = ManualClock::new();
    let hour = Duration::from_secs(3600);
    let store = MemoryStore::builder(Gcra::new(1, MINUTE).unwrap())
        .ban(Some(ratelimit_core::BanPolicy::new(hour).unwrap()))
        .build()
        .unwrap();
    let layer = RateLimitLayer::builder(PeerIp::new())
        .limit("logins", store)
        .clock(clock.clone())
        .response(Grpc::new())
        .build()
        .unwrap();
    let svc = BoxCloneService::new(tower::Layer::layer(&layer, ok()));
    assert_eq!(code(&send(&svc, from("203.0.113.7:1")).await), Code::Ok);
    // The second call is denied, and the denial bans the key for an hour.
    send(&svc, from("203.0.113.7:2")).await;
    clock.advance(MINUTE * 2);
    let res = send(&svc, from("203.0.113.7:3")).await;
    let status = Status::from_header_map(res.headers()).unwrap();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status
            .message()
            .starts_with("Banned by rate limit \"logins\": retry in"),
        "{}",
        status.message()
    );
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "BANNED");
    assert_eq!(info.metadata["limit"], "logins");
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(retry.retry_delay.unwrap() > MINUTE * 50, "{retry:?}");
}
