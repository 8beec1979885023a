//! What both example servers need to face the open internet: a hardened
//! accept loop serving HTTP/1.1 and HTTP/2 ([`serve`]), logs
//! ([`init_logs`]), a shutdown signal ([`shutdown_signal`]) and the shared
//! settings read from the environment ([`max_keys_from_env`],
//! [`ServeOptions::from_env`]).
//!
//! `axum-example` uses this module too (`hyper_example::server`), so both
//! serve the same way; `grpc-example` uses it for its logs, settings and
//! accept loop backoff (tonic serves the connections).
//!
//! One port serves HTTP/1.1 and cleartext HTTP/2 with prior knowledge
//! (h2c: a client that opens with the HTTP/2 preface). Every HTTP/2
//! stream is a request like any other: it goes through the same layers,
//! tagged with the same peer address, and each is counted by the limits.
//!
//! Against slow, half-sent or idle connections, each has:
//!
//! - a **header read timeout** ([`ServeOptions::header_read_timeout`],
//!   10 s): an HTTP/1.1 request head not complete in time, counted from the
//!   connection's start or the end of the previous response, closes the
//!   connection (so an idle HTTP/1.1 connection lasts at most this long);
//! - an **idle timeout** ([`ServeOptions::idle_timeout`], 10 s): a
//!   connection with no request in flight that long (since it was accepted
//!   or since its last response was sent) is closed, HTTP/2 with a
//!   `GOAWAY`; one that sent nothing yet is closed too;
//! - a **request timeout** ([`ServeOptions::request_timeout`], 10 s): a
//!   request (its body and its handling) not done in time is answered
//!   `408 Request Timeout` (an HTTP/1.1 connection is then closed);
//! - a **body size limit** ([`ServeOptions::max_body_bytes`], 64 KiB): a
//!   declared `Content-Length` above it is answered `413` at once, before
//!   any of the body is read, and a longer chunked body fails at the limit;
//! - at most [`ServeOptions::max_streams_per_connection`] HTTP/2 streams
//!   at once (100).
//!
//! Against floods of connections:
//!
//! - a client (an IPv4 address, an IPv6 /64) holds at most
//!   [`ServeOptions::max_connections_per_client`] connections (100); one
//!   more is closed as soon as it is accepted, and the others are served
//!   as before;
//! - at most [`ServeOptions::max_connections`] connections are open at
//!   once ([`ServeOptions::from_env`] keeps it below the open-file limit).
//!   A connection that comes when all are taken replaces the one idle
//!   longest, closed at once; if none is idle, it waits for one to close
//!   (the kernel queues the rest);
//! - accept errors that mean the process is out of a resource (`EMFILE`,
//!   `ENFILE`, `ENOBUFS`, `ENOMEM`) shed the connections idle longest (up
//!   to [`SHED_ON_ACCEPT_ERROR`]) and make the loop back off, from 10 ms
//!   doubling to 1 s, instead of spinning ([`AcceptBackoff`]).
//!
//! The caps log a warning (at most one a second) when they close or hold
//! back connections, and every connection the server closes on its own is
//! counted in [`CONNECTIONS_CLOSED`] (`server_connections_closed_total`),
//! by `reason`: `client_cap`, `shed_full`, `shed_accept_error`, `idle`.

mod activity;
mod connection;
mod connection_caps;
mod registry;

pub use connection_caps::{fd_reserve, open_file_limit, MAX_CAP};

use activity::{Activity, TrackedBody};
use connection::{drive, Ended};
use hyper::body::Incoming;
use hyper::http::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use registry::{Entry, Registry};
use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::body::Limited;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

/// The body of the requests that [`serve`] hands to the app: the
/// connection's body, limited to [`ServeOptions::max_body_bytes`].
pub type RequestBody = Limited<Incoming>;

/// Any error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How many of the connections idle longest an accept error for want of
/// file descriptors (or memory) sheds.
pub const SHED_ON_ACCEPT_ERROR: usize = 16;

/// How [`serve`] protects itself. The defaults suit a service on the open
/// internet; [`ServeOptions::from_env`] reads the connection caps from the
/// environment.
///
/// ```
/// use hyper_example::server::ServeOptions;
/// use std::time::Duration;
///
/// let options = ServeOptions {
///     idle_timeout: Duration::from_secs(30),
///     max_connections_per_client: 20,
///     ..ServeOptions::default()
/// };
/// assert_eq!(options.header_read_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a client may take to send an HTTP/1.1 request head,
    /// counted from the connection's start or the end of its previous
    /// response (default 10 s). Then the connection is closed.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight,
    /// counted from its start or the end of its last response (default
    /// 10 s), HTTP/1.1 and HTTP/2 alike. Then it is closed. (An HTTP/1.1
    /// connection is also closed by the header read timeout, whichever
    /// comes first.)
    pub idle_timeout: Duration,
    /// How long a request may take from its head to its response, the
    /// body included (default 10 s). Then it is answered `408`.
    pub request_timeout: Duration,
    /// The largest request body accepted (default 64 KiB); larger: `413`.
    pub max_body_bytes: usize,
    /// Connections served at once (default 10,000; at most [`MAX_CAP`]).
    /// When all are taken, a new one replaces the one idle longest.
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, an IPv6 /64) may hold at
    /// once (default 100); one more is closed at once.
    pub max_connections_per_client: usize,
    /// HTTP/2 streams (requests) open at once on one connection (default
    /// 100).
    pub max_streams_per_connection: u32,
    /// On shutdown, how long open connections get to finish their
    /// requests (default 10 s).
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_connections: 10_000,
            max_connections_per_client: 100,
            max_streams_per_connection: 100,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on `listener` until
/// `shutdown` completes, then lets open connections finish (at most
/// [`ServeOptions::shutdown_grace`]).
///
/// `make_service` is called once per connection with the peer's address:
/// the place to tag requests with it (axum's `ConnectInfo`, or
/// `tower_ratelimit::key::PeerAddr`). Every request of the connection,
/// HTTP/2 streams included, goes through that service.
pub async fn serve<M, S, B>(
    listener: TcpListener,
    options: ServeOptions,
    mut make_service: M,
    shutdown: impl Future<Output = ()>,
) where
    M: FnMut(SocketAddr) -> S,
    S: Service<Request<RequestBody>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Default + Send + 'static,
    B::Error: Into<BoxError>,
{
    let http = builder(&options);
    let mut gate = Gate::new(&options);
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match gate.accepted(accepted) {
            Ok(accepted) => accepted,
            Err(delay) => tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(delay) => continue,
            },
        };
        let Some(entry) = gate.admit(peer) else {
            continue;
        };
        let slot = tokio::select! {
            biased;
            () = &mut shutdown => break,
            slot = gate.slot(&entry) => slot,
        };
        let _ = stream.set_nodelay(true);
        let one = One {
            entry,
            slot,
            idle_timeout: options.idle_timeout,
            stopped: stopped.clone(),
        };
        let svc = layered(&options, make_service(peer));
        tokio::spawn(one.serve(http.clone(), stream, peer, svc));
    }
    drop(listener);
    stop.send_replace(true);
    gate.drain(options.shutdown_grace).await;
}

/// `svc` under the body size limit and the request timeout.
fn layered<S>(
    options: &ServeOptions,
    svc: S,
) -> tower_http::limit::RequestBodyLimit<tower_http::timeout::Timeout<S>> {
    ServiceBuilder::new()
        .layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            options.request_timeout,
        ))
        .service(svc)
}

/// The counter of connections the server closed on its own, by `reason`.
pub const CONNECTIONS_CLOSED: &str = "server_connections_closed_total";
/// `reason`: one more connection than its client's cap.
const CLOSED_CLIENT_CAP: &str = "client_cap";
/// `reason`: idle longest when all slots were taken.
const CLOSED_SHED_FULL: &str = "shed_full";
/// `reason`: idle longest when out of file descriptors (or memory).
const CLOSED_SHED_ACCEPT_ERROR: &str = "shed_accept_error";
/// `reason`: no request in flight for the idle timeout.
const CLOSED_IDLE: &str = "idle";

/// Counts `n` connections closed for `reason` in [`CONNECTIONS_CLOSED`].
fn closed(reason: &'static str, n: usize) {
    if n > 0 {
        metrics::counter!(CONNECTIONS_CLOSED, "reason" => reason).increment(n as u64);
    }
}

/// The HTTP/2 flow-control window of a stream: 64 KiB, the largest body
/// by default (the protocol's own default is 64 KiB less one byte).
const H2_STREAM_WINDOW: u32 = 64 * 1024;

/// The HTTP/1.1 and HTTP/2 settings of every connection.
fn builder(options: &ServeOptions) -> auto::Builder<TokioExecutor> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    // A client may send this much before the app reads it: a stream its
    // window, a connection at most 256 KiB, whatever its streams.
    http.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(options.max_streams_per_connection)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(4 * H2_STREAM_WINDOW);
    http
}

/// The accept loop's state: the open connections and their slots, and
/// its decisions on each accepted connection (or error), with their
/// throttled warnings.
struct Gate {
    max: usize,
    registry: Arc<Registry>,
    slots: Arc<Semaphore>,
    backoff: AcceptBackoff,
    full: Throttled,
    over_cap: Throttled,
}

impl Gate {
    fn new(options: &ServeOptions) -> Self {
        let max = options.max_connections.clamp(1, MAX_CAP);
        Self {
            max,
            registry: Registry::new(options.max_connections_per_client, Instant::now()),
            slots: Arc::new(Semaphore::new(max)),
            backoff: AcceptBackoff::new(),
            full: Throttled::new(),
            over_cap: Throttled::new(),
        }
    }

    /// The connection, or after an error how long to wait before the
    /// next `accept`, having shed idle connections if the error means the
    /// process ran out of file descriptors (or memory).
    fn accepted(
        &mut self,
        accepted: io::Result<(TcpStream, SocketAddr)>,
    ) -> Result<(TcpStream, SocketAddr), Duration> {
        match accepted {
            Ok(accepted) => {
                self.backoff.succeeded();
                Ok(accepted)
            }
            Err(e) => {
                let delay = self.backoff.failed(&e);
                if !delay.is_zero() {
                    let shed = self.registry.shed_oldest_idle(SHED_ON_ACCEPT_ERROR, None);
                    closed(CLOSED_SHED_ACCEPT_ERROR, shed);
                    tracing::debug!(shed, "idle connections shed to free file descriptors");
                }
                Err(delay)
            }
        }
    }

    /// Registers a connection from `peer`, or closes it at once (`None`)
    /// when its client holds its cap.
    fn admit(&mut self, peer: SocketAddr) -> Option<Entry> {
        let entry = self.registry.admit(peer.ip());
        if entry.is_none() {
            closed(CLOSED_CLIENT_CAP, 1);
            self.over_cap.warn(|skipped| {
                tracing::warn!(
                    client = %peer.ip(),
                    skipped,
                    "connection cap per client reached: new connection closed"
                );
            });
        }
        entry
    }

    /// A slot for `newcomer`: a free one, or when all are taken the one of
    /// the connection idle longest (never the newcomer), shed; if none is
    /// idle, the first to be freed.
    async fn slot(&mut self, newcomer: &Entry) -> OwnedSemaphorePermit {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return slot;
        }
        let shed = self.registry.shed_oldest_idle(1, Some(newcomer));
        closed(CLOSED_SHED_FULL, shed);
        let max = self.max;
        self.full.warn(|skipped| {
            if shed == 0 {
                tracing::warn!(
                    max,
                    skipped,
                    "connection limit reached, none idle: waiting for one to close"
                );
            } else {
                tracing::warn!(
                    max,
                    skipped,
                    "connection limit reached: the connection idle longest closed"
                );
            }
        });
        Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// After shutdown: waits at most `grace` for every connection to
    /// close.
    async fn drain(self, grace: Duration) {
        tracing::info!(
            open = self.registry.len(),
            ?grace,
            "shutting down: no new connections; open ones may finish"
        );
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        if tokio::time::timeout(grace, self.slots.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("connections still open after the grace period: dropped");
        }
    }
}

/// One accepted connection and what it holds until it closes.
struct One {
    entry: Entry,
    slot: OwnedSemaphorePermit,
    idle_timeout: Duration,
    stopped: watch::Receiver<bool>,
}

impl One {
    /// Serves `stream` with `svc`, counting each request in flight until
    /// its response body is dropped.
    fn serve<S, B>(
        self,
        http: auto::Builder<TokioExecutor>,
        stream: TcpStream,
        peer: SocketAddr,
        svc: S,
    ) -> impl Future<Output = ()> + Send
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let activity: Arc<Activity> = Arc::clone(&self.entry.activity);
        let tracked = hyper::service::service_fn(move |req: Request<Incoming>| {
            let in_flight = activity.begin();
            let call = svc.clone().oneshot(req);
            async move {
                let res = call.await.map_err(|e| Failed(e.into()))?;
                Ok::<_, Failed>(res.map(|body| TrackedBody::new(body, in_flight)))
            }
        });
        async move {
            let conn = http.serve_connection(TokioIo::new(stream), tracked);
            let mut conn = std::pin::pin!(conn);
            let ended = drive(
                conn.as_mut(),
                |c| c.graceful_shutdown(),
                &self.entry.activity,
                self.idle_timeout,
                self.stopped,
            )
            .await;
            match ended {
                Ended::Done(Ok(())) => {}
                Ended::Done(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "connection closed on an error");
                }
                Ended::Idle => {
                    closed(CLOSED_IDLE, 1);
                    tracing::debug!(%peer, "idle connection closed");
                }
                Ended::Shed => tracing::debug!(%peer, "idle connection shed"),
            }
            drop(self.slot);
        }
    }
}

/// A service's error, as hyper takes it. (A boxed error as such trips
/// the compiler's proof that the connection's future is `Send`.)
#[derive(Debug)]
struct Failed(BoxError);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// How the accept loop reacts to errors: the connection-level ones
/// (`ECONNABORTED`, `ECONNRESET`...) concern one client, so the next
/// `accept` follows at once; any other (out of file descriptors, of
/// memory...) would recur at once, so it waits, from 10 ms doubling up to
/// 1 s, until an `accept` succeeds. Warnings are logged at most once a
/// second.
#[derive(Debug)]
pub struct AcceptBackoff {
    delay: Duration,
    log: Throttled,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl AcceptBackoff {
    /// The first wait after a resource error.
    pub const FIRST: Duration = Duration::from_millis(10);
    /// The longest wait.
    pub const MAX: Duration = Duration::from_secs(1);

    /// No errors yet.
    pub fn new() -> Self {
        Self {
            delay: Duration::ZERO,
            log: Throttled::new(),
        }
    }

    /// After a failed `accept`: how long to wait before the next one
    /// (zero for an error that concerns one connection only).
    pub fn failed(&mut self, error: &io::Error) -> Duration {
        if is_connection_error(error) {
            tracing::debug!(%error, "accept failed for one connection");
            return Duration::ZERO;
        }
        self.delay = (self.delay * 2).clamp(Self::FIRST, Self::MAX);
        let delay = self.delay;
        self.log.warn(|skipped| {
            tracing::warn!(%error, ?delay, skipped, "accept failed: backing off");
        });
        delay
    }

    /// After a successful `accept`: the next error starts from
    /// [`FIRST`](Self::FIRST) again.
    pub fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Lets a warning through at most once a second, telling how many were
/// skipped since the last one.
#[derive(Debug, Default)]
pub struct Throttled {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttled {
    /// Lets the first warning through.
    pub fn new() -> Self {
        Self {
            last: None,
            skipped: 0,
        }
    }

    /// Calls `log` with the number skipped since the last call let
    /// through, unless one was let through less than a second ago.
    pub fn warn(&mut self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.skipped += 1;
            return;
        }
        self.last = Some(now);
        log(std::mem::take(&mut self.skipped));
    }
}

/// Warns, once at startup, of each trusted proxy range that holds public
/// addresses (`TRUSTED_PROXIES=0.0.0.0/0`, say): a client there can write
/// the forwarding header and choose its own key. Right for a CDN's
/// published ranges, which is why it is a warning.
pub fn warn_of_public_proxies(client_ip: &tower_ratelimit::key::ClientIp) {
    for net in client_ip.public_trusted() {
        tracing::warn!(
            %net,
            "TRUSTED_PROXIES holds public addresses: any client in this range can set its \
             own address in the forwarding header; trust only your proxies' ranges"
        );
    }
}

/// Completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM. The handlers are
/// installed when this is called (inside the runtime), not when the future
/// is first polled, so a signal that arrives as soon as the server says it
/// listens is not lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn recv(signal: Option<Signal>) {
            match signal {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let int = signal(SignalKind::interrupt()).ok();
        let term = signal(SignalKind::terminate()).ok();
        async move {
            tokio::select! {
                () = recv(int) => tracing::info!("SIGINT: shutting down"),
                () = recv(term) => tracing::info!("SIGTERM: shutting down"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("SIGINT: shutting down");
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as text, or
/// with `LOG_FORMAT=json` as one JSON object per line. A `RUST_LOG` that
/// does not parse, or a `LOG_FORMAT` other than `text` or `json`, is an
/// error naming it.
pub fn init_logs() -> Result<(), EnvError> {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let json = match std::env::var("LOG_FORMAT") {
        Err(_) => false,
        Ok(v) => match v.trim() {
            "" | "text" => false,
            "json" => true,
            _ => {
                return Err(EnvError::new(
                    "LOG_FORMAT",
                    Some(v),
                    "expected text or json",
                ))
            }
        },
    };
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .map_err(|e| EnvError::new("RUST_LOG", std::env::var("RUST_LOG").ok(), e))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    Ok(())
}

/// The default cap on the keys of each in-memory store.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The largest cap [`parse_max_keys`] accepts.
pub const MAX_MAX_KEYS: usize = 1_000_000_000;

/// Reads `RATELIMIT_MAX_KEYS`, the cap on the keys of each in-memory store
/// ([`DEFAULT_MAX_KEYS`] when unset).
pub fn max_keys_from_env() -> Result<usize, EnvError> {
    match std::env::var("RATELIMIT_MAX_KEYS") {
        Ok(value) => parse_max_keys(&value),
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_KEYS),
        Err(e) => Err(EnvError::new("RATELIMIT_MAX_KEYS", None, e)),
    }
}

/// Parses a value of `RATELIMIT_MAX_KEYS`: a whole number from 1 to
/// [`MAX_MAX_KEYS`], surrounding blanks allowed.
pub fn parse_max_keys(value: &str) -> Result<usize, EnvError> {
    parse_whole_number("RATELIMIT_MAX_KEYS", value, MAX_MAX_KEYS)
}

/// Parses `value` of `variable`: a whole number from 1 to `max`,
/// surrounding blanks allowed.
fn parse_whole_number(variable: &'static str, value: &str, max: usize) -> Result<usize, EnvError> {
    let error = |why: &str| {
        EnvError::new(
            variable,
            Some(value.to_owned()),
            format!("{why}: expected a whole number from 1 to {max}"),
        )
    };
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("not a number"));
    }
    match digits.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(error("out of range")),
    }
}

/// A bad environment variable: its name, its value when it may be shown,
/// and why it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The variable's name.
    pub variable: &'static str,
    /// Its value; `None` when absent or secret.
    pub value: Option<String>,
    /// Why it is refused.
    pub reason: String,
}

impl EnvError {
    /// `variable`, set to `value`, is refused because of `reason`.
    pub fn new(variable: &'static str, value: Option<String>, reason: impl fmt::Display) -> Self {
        Self {
            variable,
            value,
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}={value:?}: {}", self.variable, self.reason),
            None => write!(f, "{}: {}", self.variable, self.reason),
        }
    }
}

impl std::error::Error for EnvError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: io::ErrorKind) -> io::Error {
        io::Error::from(kind)
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_on_resource_errors_up_to_a_second() {
        let mut b = AcceptBackoff::new();
        let emfile = io::Error::from_raw_os_error(24); // EMFILE on Linux and macOS
        let waits: Vec<_> = (0..10).map(|_| b.failed(&emfile).as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        // One connection's trouble: no wait, and the backoff stays.
        assert_eq!(
            b.failed(&err(io::ErrorKind::ConnectionAborted)),
            Duration::ZERO
        );
        assert_eq!(
            b.failed(&err(io::ErrorKind::ConnectionReset)),
            Duration::ZERO
        );
        assert_eq!(b.failed(&emfile), AcceptBackoff::MAX);
        b.succeeded();
        assert_eq!(
            b.failed(&err(io::ErrorKind::OutOfMemory)),
            AcceptBackoff::FIRST
        );
    }

    #[tokio::test(start_paused = true)]
    async fn warnings_at_most_once_a_second() {
        let mut t = Throttled::new();
        let mut logged = Vec::new();
        for _ in 0..5 {
            t.warn(|skipped| logged.push(skipped));
            tokio::time::advance(Duration::from_millis(300)).await;
        }
        // t = 0, 300, 600, 900 ms: one; 1200 ms: the next, 3 skipped.
        assert_eq!(logged, [0, 3]);
    }

    #[test]
    fn max_keys_values() {
        assert_eq!(parse_max_keys("1"), Ok(1));
        assert_eq!(parse_max_keys(" 250000 "), Ok(250_000));
        assert_eq!(parse_max_keys("1000000000"), Ok(MAX_MAX_KEYS));
        for bad in [
            "",
            " ",
            "0",
            "-1",
            "+5",
            "1e6",
            "1_000",
            "10 00",
            "abc",
            "1000000001",
        ] {
            let e = parse_max_keys(bad).unwrap_err();
            assert_eq!(e.variable, "RATELIMIT_MAX_KEYS");
            let shown = e.to_string();
            assert!(shown.starts_with("RATELIMIT_MAX_KEYS="), "{shown}");
            assert!(shown.contains("expected a whole number"), "{shown}");
        }
        assert!(parse_max_keys("99999999999999999999999").is_err());
    }
}
