//! `ClientLayer` against scripted servers on tokio's paused clock: what
//! it retries and when, what it holds, how it paces.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use ratelimit_async::client::{ClientLayer, TpsBudget};
use ratelimit_async::Limiter;
use ratelimit_core::TokioClock;
use ratelimit_core::{Gcra, MemoryStore};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;
use tower::util::BoxCloneService;
use tower::{service_fn, Layer, Service, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// One scripted answer: a response, or a failure of the inner service.
type Answer = Result<Response<String>, String>;

/// A scripted server: answers in turn from `script` (then 200s), and
/// records when each request arrived (since the start) and its URI.
#[derive(Clone)]
struct Server {
    script: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<(Duration, String)>>>,
    start: Instant,
}

impl Server {
    fn new(script: Vec<Answer>) -> Self {
        Self {
            script: Arc::new(Mutex::new(script.into())),
            seen: Arc::default(),
            start: Instant::now(),
        }
    }

    fn service(&self) -> BoxCloneService<Request<Full<Bytes>>, Response<String>, BoxError> {
        let server = self.clone();
        BoxCloneService::new(service_fn(move |req: Request<Full<Bytes>>| {
            let server = server.clone();
            async move {
                let at = server.start.elapsed();
                server
                    .seen
                    .lock()
                    .unwrap()
                    .push((at, req.uri().to_string()));
                let next = server.script.lock().unwrap().pop_front();
                match next {
                    Some(Ok(res)) => Ok(res),
                    Some(Err(e)) => Err(BoxError::from(e)),
                    None => Ok(Response::new("ok".to_string())),
                }
            }
        }))
    }

    fn seen(&self) -> Vec<Duration> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(at, _)| *at)
            .collect()
    }
}

fn status(code: u16, headers: &[(&str, &str)]) -> Answer {
    let mut b = Response::builder().status(code);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    Ok(b.body(String::new()).unwrap())
}

fn req(method: Method, uri: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(uri)
        .body(Full::new(Bytes::from_static(b"body")))
        .unwrap()
}

async fn send<S>(client: &mut S, r: Request<Full<Bytes>>) -> Result<Response<String>, BoxError>
where
    S: Service<Request<Full<Bytes>>, Response = Response<String>, Error = BoxError>,
{
    client.ready().await?.call(r).await
}

const S1: Duration = Duration::from_secs(1);
const GET: Method = Method::GET;

#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_its_retry_after_in_seconds() {
    let server = Server::new(vec![status(429, &[("retry-after", "2")])]);
    let mut client = ClientLayer::new().layer(server.service());
    let res = send(&mut client, req(GET, "http://api.test/x"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The backoff (at most 100 ms) is below the server's 2 s.
    assert_eq!(server.seen(), vec![Duration::ZERO, 2 * S1]);
}

#[tokio::test(start_paused = true)]
async fn a_503_is_retried_after_its_retry_after_as_a_date() {
    let t0 = SystemTime::now();
    let date = httpdate::fmt_http_date(t0 + Duration::from_secs(3));
    let server = Server::new(vec![status(503, &[("retry-after", &date)])]);
    let mut client = ClientLayer::new().layer(server.service());
    let res = send(&mut client, req(Method::PUT, "http://api.test/x"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let seen = server.seen();
    // The date has whole seconds: 2 to 3 s from `t0`, less the real time
    // the client took to read it (the wall clock does not pause).
    let read = t0.elapsed().unwrap();
    assert!(
        seen.len() == 2 && seen[1] >= 2 * S1 - read && seen[1] <= 3 * S1,
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_requests_are_retried_only_when_asked() {
    let server = Server::new(vec![status(429, &[("retry-after", "1")])]);
    let mut client = ClientLayer::new().layer(server.service());
    let res = send(&mut client, req(Method::POST, "http://api.test/x"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(server.seen().len(), 1);

    let server = Server::new(vec![status(429, &[("retry-after", "1")])]);
    let mut client = ClientLayer::new()
        .retry_non_idempotent(true)
        .layer(server.service());
    let res = send(&mut client, req(Method::POST, "http://api.test/x"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(server.seen(), vec![Duration::ZERO, S1]);
}

#[tokio::test(start_paused = true)]
async fn ratelimit_r0_holds_the_next_request_to_that_host_for_t() {
    let server = Server::new(vec![status(
        200,
        &[
            ("ratelimit-policy", "\"api\";q=10;w=60"),
            ("ratelimit", "\"api\";r=0;t=5"),
        ],
    )]);
    let mut client = ClientLayer::new().layer(server.service());
    send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    // Another host is not held.
    send(&mut client, req(GET, "http://other.test/a"))
        .await
        .unwrap();
    send(&mut client, req(GET, "http://API.test:80/b"))
        .await
        .unwrap();
    assert_eq!(server.seen(), vec![Duration::ZERO, Duration::ZERO, 5 * S1]);
}

#[tokio::test(start_paused = true)]
async fn quota_left_holds_nothing() {
    let server = Server::new(vec![status(200, &[("ratelimit", "\"api\";r=1;t=5")])]);
    let mut client = ClientLayer::new().layer(server.service());
    send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(server.seen(), vec![Duration::ZERO, Duration::ZERO]);
}

#[tokio::test(start_paused = true)]
async fn backoff_is_capped_exponential_with_full_jitter_and_a_retry_limit() {
    let server = Server::new((0..10).map(|_| status(503, &[])).collect());
    let mut client = ClientLayer::new()
        .backoff(Duration::from_millis(100), Duration::from_millis(300))
        .max_retries(4)
        .layer(server.service());
    let res = send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let seen = server.seen();
    assert_eq!(seen.len(), 5, "{seen:?}");
    // Gaps at most 100, 200, 300 (capped), 300 ms.
    let caps = [100, 200, 300, 300].map(Duration::from_millis);
    for (pair, cap) in seen.windows(2).zip(caps) {
        assert!(pair[1] - pair[0] <= cap, "{seen:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_stops_retries() {
    let server = Server::new((0..10).map(|_| status(503, &[])).collect());
    let mut client = ClientLayer::new()
        .budget(TpsBudget::new(Duration::from_secs(10), 0, 0.0))
        .layer(server.service());
    let res = send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_max_hold_is_returned_not_waited_for() {
    let server = Server::new(vec![status(429, &[("retry-after", "3600")])]);
    let mut client = ClientLayer::new()
        .max_hold(Duration::from_secs(60))
        .layer(server.service());
    let res = send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    // The host is held, for max_hold.
    send(&mut client, req(GET, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(server.seen(), vec![Duration::ZERO, 60 * S1]);
}

#[tokio::test(start_paused = true)]
async fn failures_of_idempotent_requests_are_retried() {
    let server = Server::new(vec![Err("connection reset".into())]);
    let mut client = ClientLayer::new().layer(server.service());
    let res = send(&mut client, req(Method::DELETE, "http://api.test/a"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(server.seen().len(), 2);

    let server = Server::new(vec![Err("connection reset".into())]);
    let mut client = ClientLayer::new().layer(server.service());
    let err = send(&mut client, req(Method::PATCH, "http://api.test/a"))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "connection reset");
}

#[tokio::test(start_paused = true)]
async fn pacing_per_host_with_a_limiter() {
    let server = Server::new(vec![]);
    // 2 per second per host, burst 1: one every 500 ms.
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(2, S1, 1).unwrap()))
        .clock(TokioClock::new());
    let client = ClientLayer::new().pace(limiter).layer(server.service());
    let calls = [
        "http://a.test/1",
        "http://a.test/2",
        "http://b.test/1",
        "http://a.test/3",
    ]
    .map(|uri| {
        // Boxed outside an async block: the compiler can't prove a
        // boxed-error service's future `Send` inside one.
        let call: Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(client.clone().oneshot(req(GET, uri)));
        tokio::spawn(call)
    });
    for c in calls {
        c.await.unwrap().unwrap();
    }
    let mut seen = server.seen.lock().unwrap().clone();
    seen.sort();
    let a: Vec<Duration> = seen
        .iter()
        .filter(|(_, u)| u.contains("a.test"))
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(a, vec![Duration::ZERO, S1 / 2, S1]);
    assert!(seen.contains(&(Duration::ZERO, "http://b.test/1".into())));
}

#[tokio::test(start_paused = true)]
async fn pacing_by_a_key_of_our_own() {
    let server = Server::new(vec![]);
    let by_tenant = |_: &Method, _: &http::Uri, h: &http::HeaderMap| {
        h.get("x-tenant").map(|v| v.as_bytes().to_vec())
    };
    let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(1, S1, 1).unwrap()))
        .clock(TokioClock::new());
    let mut client = ClientLayer::keyed(by_tenant)
        .pace(limiter)
        .layer(server.service());
    for host in ["http://a.test/", "http://b.test/"] {
        let mut r = req(GET, host);
        r.headers_mut().insert("x-tenant", "t1".parse().unwrap());
        send(&mut client, r).await.unwrap();
    }
    // Untagged requests are not paced.
    send(&mut client, req(GET, "http://a.test/")).await.unwrap();
    assert_eq!(server.seen(), vec![Duration::ZERO, S1, S1]);
}

#[tokio::test(start_paused = true)]
async fn holds_are_bounded_by_max_hosts() {
    let held = || status(200, &[("ratelimit", "\"api\";r=0;t=5")]);
    let server = Server::new(vec![held(), held(), held()]);
    let mut client = ClientLayer::new().max_hosts(2).layer(server.service());
    for host in ["http://a.test/", "http://b.test/", "http://c.test/"] {
        send(&mut client, req(GET, host)).await.unwrap();
    }
    // a and b are held; c's hold did not fit, so c goes at once.
    send(&mut client, req(GET, "http://c.test/")).await.unwrap();
    send(&mut client, req(GET, "http://a.test/")).await.unwrap();
    let z = Duration::ZERO;
    assert_eq!(server.seen(), vec![z, z, z, z, 5 * S1]);
}
