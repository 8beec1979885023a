//! The gRPC example of `tower-ratelimit`: a tonic server with
//! `grpc.health.v1.Health` (tonic-health) and its own `demo.v1.Echo`
//! service behind one [`RateLimitLayer`].
//!
//! - `Health/Check`: 5 calls per minute per client IP ([`Limits`]).
//! - `Echo/Say`: 60 calls per minute per client IP.
//! - Every other method (`Health/Watch`...): not limited.
//!
//! A limited call gets the gRPC status `RESOURCE_EXHAUSTED` with a
//! `google.rpc.RetryInfo` detail saying how long to wait
//! ([`Grpc`]), never an HTTP 429. Clients are keyed by their TCP peer
//! address (IPv6 per /64), or behind trusted proxies by the address those
//! proxies write ([`Config`]).
//!
//! [`run`] serves it with what tonic offers against hostile clients
//! ([`ServeOptions`]), and an accept loop that caps connections and backs
//! off when the process runs out of file descriptors.

pub mod echo;
mod incoming;

use echo::{EchoServer, EchoService};
use http::request::Parts;
use hyper_example::max_keys::{parse_max_keys, DEFAULT_MAX_KEYS};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::transport::Server;
use tower_ratelimit::key::{ClientIp, IpKey, ProxyHeader};
use tower_ratelimit::response::Grpc;
use tower_ratelimit::serve::{BoxError, EnvError};
use tower_ratelimit::strategy::Selection;
use tower_ratelimit::{Clock, Gcra, MemoryStore, RateLimitLayer, SystemClock};

/// The gRPC path of `Health/Check`.
pub const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";

/// The limits, per client IP, each a GCRA (a burst of the whole limit,
/// then one call per window / limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `Health/Check` calls per [`health_window`](Self::health_window)
    /// (default 5).
    pub health_checks: u64,
    /// Default one minute.
    pub health_window: Duration,
    /// `Echo/Say` calls per [`echo_window`](Self::echo_window) (default
    /// 60).
    pub echo: u64,
    /// Default one minute.
    pub echo_window: Duration,
    /// The most client IPs each limit keeps state for (default
    /// [`DEFAULT_MAX_KEYS`], `RATELIMIT_MAX_KEYS`).
    pub max_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            health_checks: 5,
            health_window: Duration::from_secs(60),
            echo: 60,
            echo_window: Duration::from_secs(60),
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

/// The app's settings.
#[derive(Clone)]
pub struct Config {
    /// The limits.
    pub limits: Limits,
    /// How client IPs are found: the trusted proxies (none by default: the
    /// TCP peer) and the one header they write (`X-Forwarded-For`).
    pub client_ip: ClientIp,
    /// The limits' clock (tests use a `ManualClock`).
    pub clock: Arc<dyn Clock>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            client_ip: ClientIp::default(),
            clock: Arc::new(SystemClock::new()),
        }
    }
}

impl Config {
    /// Reads `RATELIMIT_MAX_KEYS`, `TRUSTED_PROXIES` (comma-separated
    /// CIDRs; unset: none) and `TRUSTED_PROXY_HEADER` (`x-forwarded-for`,
    /// the default; `forwarded`; `either`; or a single-address header such
    /// as `x-real-ip`).
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with the variables looked up by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let max_keys = match var("RATELIMIT_MAX_KEYS") {
            Some(v) => parse_max_keys(&v)?,
            None => DEFAULT_MAX_KEYS,
        };
        let header = match var("TRUSTED_PROXY_HEADER") {
            Some(h) if !h.trim().is_empty() => h
                .parse::<ProxyHeader>()
                .map_err(|e| EnvError::new("TRUSTED_PROXY_HEADER", Some(h), e))?,
            _ => ProxyHeader::XForwardedFor,
        };
        let proxies = var("TRUSTED_PROXIES").unwrap_or_default();
        let client_ip = proxies
            .parse::<ClientIp>()
            .map_err(|e| EnvError::new("TRUSTED_PROXIES", Some(proxies.clone()), e))?
            .header(header);
        Ok(Self {
            limits: Limits {
                max_keys,
                ..Limits::default()
            },
            client_ip,
            ..Self::default()
        })
    }
}

/// The rate-limit layer of the whole server.
pub type Layer = RateLimitLayer<ClientIp, MemoryStore<Gcra, IpKey>, Grpc>;

/// Both limits in one layer, each applied to its method only (selected by
/// the gRPC path), answered as gRPC statuses.
pub fn rate_limit(config: &Config) -> Result<Layer, BoxError> {
    let limits = config.limits;
    let store = |calls, window| -> Result<_, BoxError> {
        Ok(MemoryStore::<_, IpKey>::builder(Gcra::new(calls, window)?)
            .max_keys(Some(limits.max_keys))
            .build()?)
    };
    let layer = RateLimitLayer::builder(config.client_ip.clone())
        .limit(
            "health-check",
            store(limits.health_checks, limits.health_window)?,
        )
        .limit("echo", store(limits.echo, limits.echo_window)?)
        .select(|req: &Parts, _: &IpKey| match req.uri.path() {
            HEALTH_CHECK => Selection::only(0),
            echo::SAY => Selection::only(1),
            _ => Selection::NONE,
        })
        .clock(config.clock.clone())
        .response(Grpc::new())
        .build()?;
    Ok(layer)
}

/// How [`run`] protects itself. The defaults suit a service on the open
/// internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a call may take to be answered (default 10 s); then it
    /// gets `CANCELLED`. A shorter `grpc-timeout` from the client wins.
    pub request_timeout: Duration,
    /// Connections served at once (default 10,000); past that the accept
    /// loop waits for one to close (the kernel queues the rest).
    pub max_connections: usize,
    /// Calls open at once on one connection (HTTP/2
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, default 100).
    pub max_concurrent_streams: u32,
    /// Calls handled at once per connection (default 32); the rest wait.
    pub concurrency_limit_per_connection: usize,
    /// The largest message accepted or sent (default 4 KiB); larger:
    /// `RESOURCE_EXHAUSTED` from tonic.
    pub max_message_bytes: usize,
    /// The largest header block (metadata) accepted (default 16 KiB).
    pub max_header_list_bytes: u32,
    /// How often an idle connection is pinged (default 30 s)...
    pub keepalive_interval: Duration,
    /// ...and how long a ping may go unanswered before it is closed
    /// (default 10 s).
    pub keepalive_timeout: Duration,
    /// The longest a connection lives (default 10 minutes): then it is
    /// told to go away, and closed [`shutdown_grace`](Self::shutdown_grace)
    /// later. Bounds connections that never finish their handshake too.
    pub max_connection_age: Duration,
    /// On shutdown (and at the end of a connection's age), how long open
    /// calls get to finish (default 10 s).
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_concurrent_streams: 100,
            concurrency_limit_per_connection: 32,
            max_message_bytes: 4 * 1024,
            max_header_list_bytes: 16 * 1024,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves both services on `listener` until `shutdown` completes, then
/// lets open calls finish (at most [`ServeOptions::shutdown_grace`]).
pub async fn run(
    listener: TcpListener,
    config: &Config,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BoxError> {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<EchoServer<EchoService>>()
        .await;
    let max = options.max_message_bytes;
    let health = health
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let echo = EchoServer::new(EchoService)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = stopping.send(());
    };
    let serve = Server::builder()
        .timeout(options.request_timeout)
        .concurrency_limit_per_connection(options.concurrency_limit_per_connection)
        .max_concurrent_streams(options.max_concurrent_streams)
        .http2_max_header_list_size(options.max_header_list_bytes)
        .http2_keepalive_interval(Some(options.keepalive_interval))
        .http2_keepalive_timeout(Some(options.keepalive_timeout))
        .max_connection_age(options.max_connection_age)
        .max_connection_age_grace(options.shutdown_grace)
        .layer(rate_limit(config)?)
        .add_service(health)
        .add_service(echo)
        .serve_with_incoming_shutdown(incoming::accept(listener, options.max_connections), signal);
    let mut serve = std::pin::pin!(serve);
    tokio::select! {
        result = &mut serve => return result.map_err(Into::into),
        Ok(()) = stopped => {}
    }
    tracing::info!(
        grace = ?options.shutdown_grace,
        "shutting down: no new connections; open calls may finish"
    );
    match tokio::time::timeout(options.shutdown_grace, serve).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => {
            tracing::warn!("calls still open after the grace period: dropped");
            Ok(())
        }
    }
}
