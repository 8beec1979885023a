//! A simulated backend for tower-ratelimit's fair-queue tests and overload
//! benchmark: its latency is fixed up to its capacity and grows past it,
//! faster than the concurrency, so its throughput falls as it is
//! overloaded. Its clients are numbered by an `X-Client` header ([`req`],
//! [`client`]).

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The backend's response future.
///
/// ```
/// use ratelimit_test_support::backend::BoxFut;
///
/// fn answered() -> BoxFut {
///     Box::pin(async { Ok(http::Response::new(bytes::Bytes::new())) })
/// }
/// # let _ = answered();
/// ```
pub type BoxFut = Pin<Box<dyn Future<Output = Result<Response<Bytes>, Infallible>> + Send>>;

/// A backend of `capacity` whose latency is `base` up to its capacity and
/// `base * x * (1 + (x - 1) / 2)` past it, `x` being the concurrency over
/// the capacity: its throughput at 4 x capacity is 40 % of its best. A
/// request whose future is dropped (its client went away) stops using the
/// backend, as a hyper server drops the handler's future.
///
/// ```
/// use ratelimit_test_support::Backend;
/// use std::time::Duration;
///
/// let backend = Backend::new(Duration::from_millis(10), 20);
/// assert_eq!(backend.latency(20), Duration::from_millis(10)); // at capacity
/// assert!(backend.latency(80) > Duration::from_millis(10)); // overloaded
/// ```
#[derive(Clone)]
pub struct Backend {
    base: Duration,
    capacity: usize,
    /// Requests running now.
    pub running: Arc<AtomicUsize>,
    /// The most that ever ran at once.
    pub peak: Arc<AtomicUsize>,
    /// Requests completed.
    pub done: Arc<AtomicUsize>,
    /// The latency of every completed request.
    pub latencies: Arc<Mutex<Vec<Duration>>>,
}

impl Backend {
    /// A backend of `capacity`, each request taking `base` up to it.
    pub fn new(base: Duration, capacity: usize) -> Self {
        Self {
            base,
            capacity,
            running: Arc::default(),
            peak: Arc::default(),
            done: Arc::default(),
            latencies: Arc::default(),
        }
    }

    /// The latency of a request started while `n` run (itself included).
    pub fn latency(&self, n: usize) -> Duration {
        let x = (n as f64 / self.capacity as f64).max(1.0);
        self.base.mul_f64((x * (1.0 + (x - 1.0) / 2.0)).min(1e6))
    }
}

/// What the simulated clients call: the backend, bare or behind layers,
/// owned by a spawned task.
///
/// ```
/// use ratelimit_test_support::backend::BackendService;
/// use ratelimit_test_support::Backend;
/// use std::time::Duration;
///
/// fn simulate(_service: impl BackendService) {}
/// simulate(Backend::new(Duration::from_millis(10), 20));
/// ```
pub trait BackendService:
    Service<Request<()>, Response = Response<Bytes>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> BackendService for S where
    S: Service<Request<()>, Response = Response<Bytes>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// Counts a request out of `running` however it ends.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<B> Service<Request<B>> for Backend {
    type Response = Response<Bytes>;
    type Error = Infallible;
    type Future = BoxFut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<B>) -> BoxFut {
        let this = self.clone();
        Box::pin(async move {
            let n = this.running.fetch_add(1, Ordering::SeqCst) + 1;
            let _running = Running(this.running.clone());
            this.peak.fetch_max(n, Ordering::SeqCst);
            let latency = this.latency(n);
            tokio::time::sleep(latency).await;
            this.done.fetch_add(1, Ordering::SeqCst);
            this.latencies.lock().unwrap().push(latency);
            Ok(Response::new(Bytes::from_static(b"ok")))
        })
    }
}

/// The `X-Client` header as the client's number, if it is one. (A key
/// function wraps it, giving its own error when `None`.)
pub fn client(p: &Parts) -> Option<u32> {
    p.headers
        .get("x-client")
        .and_then(|v| v.to_str().ok()?.parse().ok())
}

/// A request of client `client`.
pub fn req(client: u32) -> Request<()> {
    Request::get("/")
        .header("x-client", client.to_string())
        .body(())
        .unwrap()
}
