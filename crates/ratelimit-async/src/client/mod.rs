//! A tower layer for outgoing HTTP requests: it paces them, listens to
//! what the server says about its limits, and retries with backoff.
//!
//! [`ClientLayer`] wraps any tower HTTP client service — hyper-util's
//! legacy `Client`, or anything that is a
//! `Service<http::Request<B>, Response = http::Response<_>>`. For each
//! request it:
//!
//! 1. waits while the server asked this host to be left alone: after a
//!    `429` or `503` with `Retry-After` (seconds or an HTTP-date), or a
//!    response whose `RateLimit` field has a policy at `r=0` (for `t`
//!    seconds; for the policy's `RateLimit-Policy` window `w` if `t` is
//!    missing) — held at most [`max_hold`](ClientLayer::max_hold);
//! 2. waits for its own [`Limiter`] if one is set ([`pace`](ClientLayer::pace)):
//!    per host by default, or per any key ([`ClientLayer::keyed`]), with
//!    any algorithm and store;
//! 3. sends it, and retries a `429`, a `503` or a failure of the inner
//!    service when the request is idempotent (RFC 9110: `GET`, `HEAD`,
//!    `OPTIONS`, `TRACE`, `PUT`, `DELETE`; others only after
//!    [`retry_non_idempotent`](ClientLayer::retry_non_idempotent)), with
//!    capped exponential backoff and full jitter, never sooner than
//!    `Retry-After`, at most [`max_retries`](ClientLayer::max_retries)
//!    times and within a retry budget (tower's [`TpsBudget`]: by default
//!    retries may add 20 % to the requests, plus 10 per second).
//!
//! **Bodies.** A retry sends the request again, so the request body must be
//! `Clone`: `http_body_util::Full<Bytes>`, `Empty<Bytes>`, `String`, … A
//! streaming body can't be replayed: buffer it first
//! (`http_body_util::BodyExt::collect`, then `Full::new(collected.to_bytes())`).
//!
//! **Spawning.** When the inner service's error type is itself a boxed
//! error (`BoxCloneService<_, _, BoxError>`), rustc cannot prove a call
//! made inside an `async` block `Send` ("implementation of `From` is not
//! general enough"): box the call outside it,
//! `let call: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(client.oneshot(req));`,
//! then `tokio::spawn(call)`. hyper-util's client (a concrete error type)
//! is not affected.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use bytes::Bytes;
//! use http_body_util::Empty;
//! use hyper_util::{client::legacy::Client, rt::TokioExecutor};
//! use ratelimit_async::{client::ClientLayer, Limiter};
//! use ratelimit_core::{Gcra, MemoryStore};
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! let mut client = ServiceBuilder::new()
//!     // At most 10 per minute per host, however fast the code calls.
//!     .layer(ClientLayer::new().pace(Limiter::new(MemoryStore::new(Gcra::new(10, Duration::from_secs(60))?))))
//!     .service(http);
//! let req = http::Request::get("http://127.0.0.1:3000/api/items").body(Empty::new())?;
//! let res = client.ready().await?.call(req).await?;
//! println!("{}", res.status());
//! # Ok(())
//! # }
//! ```

mod fields;
mod key;

pub use fields::{
    exhausted_for, policies, quotas, retry_after, Policy, Quota, RATELIMIT, RATELIMIT_POLICY,
};
pub use key::{Host, RequestKey};
pub use tower::retry::budget::TpsBudget;

use crate::{jitter, Limiter, WaitError};
use futures_util::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use ratelimit_core::{Decision, Store};
use std::collections::HashMap;
use std::fmt;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;
use tower::retry::budget::Budget;
use tower::{Layer, Service, ServiceExt};

/// The error of a [`Client`]: the inner service's, or the pacing
/// limiter's ([`WaitError`]), boxed as tower's errors are.
///
/// ```
/// use ratelimit_async::{client::BoxError, WaitError};
///
/// let err: BoxError = Box::new(WaitError::Never { cost: 5, limit: 3 });
/// assert!(err.to_string().contains('5'));
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

trait Pace<K>: Send + Sync {
    fn until_ready(&self, key: K) -> BoxFuture<'static, Result<Decision, WaitError>>;
}

impl<K, S> Pace<K> for Limiter<K, S>
where
    K: std::hash::Hash + Send + Sync + 'static,
    S: Store<K>,
{
    fn until_ready(&self, key: K) -> BoxFuture<'static, Result<Decision, WaitError>> {
        let limiter = self.clone();
        Box::pin(async move { Limiter::until_ready(&limiter, &key, 1).await })
    }
}

/// Where each host may be called again: bounded to `max` hosts.
struct Holds {
    until: Mutex<HoldMap>,
    max: usize,
}

#[derive(Default)]
struct HoldMap {
    by_host: HashMap<String, Instant>,
    /// When full, holds that are over are swept at most once a second, so
    /// a full map of live holds costs no request a whole pass.
    next_sweep: Option<Instant>,
}

impl Holds {
    fn new(max: usize) -> Self {
        Self {
            until: Mutex::default(),
            max,
        }
    }

    fn get(&self, host: &str) -> Option<Instant> {
        let until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until
            .by_host
            .get(host)
            .copied()
            .filter(|t| *t > Instant::now())
    }

    fn hold(&self, host: &str, until_at: Instant) {
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = until.by_host.get_mut(host) {
            *t = (*t).max(until_at);
            return;
        }
        if until.by_host.len() >= self.max {
            let now = Instant::now();
            if until.next_sweep.is_none_or(|at| at <= now) {
                until.by_host.retain(|_, t| *t > now);
                until.next_sweep = Some(now + Duration::from_secs(1));
            }
            if until.by_host.len() >= self.max {
                tracing::debug!(host, "holds full: a server's hold is not kept");
                return;
            }
        }
        until.by_host.insert(host.to_owned(), until_at);
    }
}

struct Settings {
    max_retries: u32,
    base: Duration,
    cap: Duration,
    max_hold: Duration,
    non_idempotent: bool,
}

/// The layer: see the [module docs](self). Clones share the pacing
/// limiter, the holds and the retry budget.
///
/// ```
/// use ratelimit_async::{client::ClientLayer, Limiter};
/// use ratelimit_core::{Gcra, MemoryStore};
/// use std::time::Duration;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Obeys Retry-After and RateLimit, retries GETs, and paces 10 per minute per host.
/// let per_host = Limiter::new(MemoryStore::new(Gcra::new(10, Duration::from_secs(60))?));
/// let layer = ClientLayer::new().pace(per_host).max_retries(2);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
pub struct ClientLayer<KX: RequestKey = Host> {
    key: KX,
    pacer: Option<Arc<dyn Pace<KX::Key>>>,
    settings: Arc<Settings>,
    holds: Arc<Holds>,
    budget: Arc<TpsBudget>,
}

impl<KX: RequestKey> Clone for ClientLayer<KX> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            pacer: self.pacer.clone(),
            settings: self.settings.clone(),
            holds: self.holds.clone(),
            budget: self.budget.clone(),
        }
    }
}

impl<KX: RequestKey + fmt::Debug> fmt::Debug for ClientLayer<KX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        f.debug_struct("ClientLayer")
            .field("key", &self.key)
            .field("paced", &self.pacer.is_some())
            .field("max_retries", &s.max_retries)
            .field("backoff", &(s.base, s.cap))
            .field("max_hold", &s.max_hold)
            .field("retry_non_idempotent", &s.non_idempotent)
            .finish_non_exhaustive()
    }
}

impl Default for ClientLayer<Host> {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientLayer<Host> {
    /// A layer keyed by host, without pacing of its own: it obeys the
    /// servers' `Retry-After` and `RateLimit` fields and retries idempotent
    /// requests up to 3 times, backing off from 100 ms to at most 10 s,
    /// holding a host at most 60 s, remembering holds for at most 10,000
    /// hosts.
    pub fn new() -> Self {
        Self::keyed(Host)
    }
}

impl<KX: RequestKey> ClientLayer<KX> {
    /// A layer as [`new`](ClientLayer::new)'s that paces by `key` instead
    /// of by host (the holds a server asks for stay per host). The key
    /// comes first, so a [`pace`](Self::pace) limiter is always of its
    /// key type.
    ///
    /// ```
    /// use ratelimit_async::{client::ClientLayer, Limiter};
    /// use ratelimit_core::{Gcra, MemoryStore};
    /// use std::time::Duration;
    ///
    /// let by_tenant = |_: &http::Method, _: &http::Uri, h: &http::HeaderMap| {
    ///     h.get("x-tenant").map(|v| v.as_bytes().to_vec())
    /// };
    /// let limiter = Limiter::new(MemoryStore::new(Gcra::new(10, Duration::from_secs(60)).unwrap()));
    /// let layer = ClientLayer::keyed(by_tenant).pace(limiter);
    /// # let _ = layer;
    /// ```
    pub fn keyed(key: KX) -> Self {
        Self {
            key,
            pacer: None,
            settings: Arc::new(Settings {
                max_retries: 3,
                base: Duration::from_millis(100),
                cap: Duration::from_secs(10),
                max_hold: Duration::from_secs(60),
                non_idempotent: false,
            }),
            holds: Arc::new(Holds::new(10_000)),
            budget: Arc::new(TpsBudget::default()),
        }
    }
}

impl<KX: RequestKey> ClientLayer<KX> {
    fn settings(mut self, f: impl FnOnce(&mut Settings)) -> Self {
        let mut s = Settings { ..*self.settings };
        f(&mut s);
        self.settings = Arc::new(s);
        self
    }

    /// Paces every request (each attempt, cost 1) through `limiter`, per
    /// key: each waits until the limiter admits it ([`Limiter::until_ready`]).
    /// A failing store (Redis down) fails the request with its
    /// [`WaitError`].
    pub fn pace<S: Store<KX::Key>>(mut self, limiter: Limiter<KX::Key, S>) -> Self {
        self.pacer = Some(Arc::new(limiter));
        self
    }

    /// Retries at most `n` times per request (0: never retry).
    pub fn max_retries(self, n: u32) -> Self {
        self.settings(|s| s.max_retries = n)
    }

    /// The backoff before retry `n` (from 1) is uniform in
    /// `[0, min(cap, base * 2^(n-1))]` (full jitter), and never less than
    /// the server's `Retry-After`.
    pub fn backoff(self, base: Duration, cap: Duration) -> Self {
        self.settings(|s| {
            s.base = base;
            s.cap = cap.max(base);
        })
    }

    /// The longest a host is held on the server's word; a `Retry-After`
    /// longer than this is not retried either (the response is returned).
    pub fn max_hold(self, max: Duration) -> Self {
        self.settings(|s| s.max_hold = max)
    }

    /// Retries non-idempotent requests (`POST`, `PATCH`, …) too. Only for
    /// requests that are safe to repeat: a `503` or a failed connection
    /// may come after the server acted on the request.
    pub fn retry_non_idempotent(self, yes: bool) -> Self {
        self.settings(|s| s.non_idempotent = yes)
    }

    /// The retry budget (shared by every clone of the layer).
    pub fn budget(mut self, budget: TpsBudget) -> Self {
        self.budget = Arc::new(budget);
        self
    }

    /// Remembers the holds of at most `n` hosts (at least 1); when full,
    /// a new host's hold is dropped (and logged at debug).
    pub fn max_hosts(mut self, n: usize) -> Self {
        self.holds = Arc::new(Holds::new(n.max(1)));
        self
    }
}

impl<Svc, KX: RequestKey> Layer<Svc> for ClientLayer<KX> {
    type Service = Client<Svc, KX>;

    fn layer(&self, inner: Svc) -> Self::Service {
        Client {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`ClientLayer`].
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Empty;
/// use hyper_util::{client::legacy::Client as Hyper, rt::TokioExecutor};
/// use ratelimit_async::client::{Client, ClientLayer};
/// use tower::Layer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let http = Hyper::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
/// let client: Client<_> = ClientLayer::new().layer(http);
/// # let _ = client;
/// # }
/// ```
pub struct Client<Svc, KX: RequestKey = Host> {
    inner: Svc,
    layer: ClientLayer<KX>,
}

impl<Svc: Clone, KX: RequestKey> Clone for Client<Svc, KX> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<Svc: fmt::Debug, KX: RequestKey + fmt::Debug> fmt::Debug for Client<Svc, KX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

/// A named conversion: a closure or `Into::into` inside the request's
/// future trips the compiler's `Send` check for boxed errors.
fn boxed<E: Into<BoxError>>(e: E) -> BoxError {
    e.into()
}

/// Idempotent per RFC 9110, section 9.2.2.
fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

fn backoff(settings: &Settings, retry: u32) -> Duration {
    let factor = 1u32
        .checked_shl(retry.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let ceiling = settings.base.saturating_mul(factor).min(settings.cap);
    jitter::up_to(ceiling)
}

impl<Svc, KX, B, RB> Service<Request<B>> for Client<Svc, KX>
where
    Svc: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    Svc::Error: Into<BoxError>,
    Svc::Future: Send,
    KX: RequestKey,
    B: Clone + Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<RB>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The ready service serves the first attempt; a clone the retries.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let s = &*layer.settings;
            let host = key::host(&req);
            let retryable = s.non_idempotent || is_idempotent(req.method());
            layer.budget.deposit();
            let mut retries = 0u32;
            let mut first = true;
            loop {
                if let Some(until) = host.as_deref().and_then(|h| layer.holds.get(h)) {
                    tokio::time::sleep_until(until).await;
                }
                if let Some(paced) = layer.paced(&req) {
                    paced.await?;
                }
                if !first {
                    inner.ready().await.map_err(boxed)?;
                }
                first = false;
                let can_retry = retryable && retries < s.max_retries;
                let result = inner.call(req.clone()).await.map_err(boxed);
                let wait = match layer.verdict(host.as_deref(), result, can_retry) {
                    ControlFlow::Break(done) => return done,
                    ControlFlow::Continue(wait) => wait,
                };
                retries += 1;
                let pause = backoff(s, retries).max(wait);
                tracing::debug!(
                    retry = retries,
                    ?pause,
                    "retrying a limited or failed request"
                );
                tokio::time::sleep(pause).await;
            }
        })
    }
}

impl<KX: RequestKey> ClientLayer<KX> {
    /// The wait for the pacing limiter, if one is set and `req` has a key.
    fn paced<B>(
        &self,
        req: &Request<B>,
    ) -> Option<BoxFuture<'static, Result<Decision, WaitError>>> {
        let pacer = self.pacer.as_ref()?;
        let key = self.key.key(req)?;
        Some(pacer.until_ready(key))
    }

    /// What becomes of an attempt's `result`: returned (`Break`), or
    /// retried after at least the server's wait (`Continue`), which spends
    /// from the budget. A wait the server asks for holds `host` too.
    fn verdict<RB>(
        &self,
        host: Option<&str>,
        result: Result<Response<RB>, BoxError>,
        can_retry: bool,
    ) -> ControlFlow<Result<Response<RB>, BoxError>, Duration> {
        let s = &*self.settings;
        match result {
            Ok(res) => {
                let asked = server_wait(&res);
                if let (Some(host), Some(wait)) = (host, asked) {
                    self.holds.hold(host, Instant::now() + wait.min(s.max_hold));
                }
                let limited = matches!(
                    res.status(),
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                );
                let too_long = asked.is_some_and(|w| w > s.max_hold);
                if !(limited && can_retry && !too_long && self.budget.withdraw()) {
                    return ControlFlow::Break(Ok(res));
                }
                ControlFlow::Continue(asked.unwrap_or_default())
            }
            Err(e) => {
                if !(can_retry && self.budget.withdraw()) {
                    return ControlFlow::Break(Err(e));
                }
                ControlFlow::Continue(Duration::ZERO)
            }
        }
    }
}

/// How long the response asks the client to leave the server alone:
/// `Retry-After` on a `429` or `503`, and the `RateLimit` field's
/// exhausted policies on any response; the longer of the two.
fn server_wait<RB>(res: &Response<RB>) -> Option<Duration> {
    let retry_after = match res.status() {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            retry_after(res.headers(), SystemTime::now())
        }
        _ => None,
    };
    let exhausted = exhausted_for(res.headers()).filter(|t| !t.is_zero());
    retry_after.max(exhausted)
}
