//! The running server: its listeners (gRPC, HTTP, metrics and admin if configured), each on tower-ratelimit's hardened server (`serve`), store upkeep, and a graceful stop.

use crate::grpc::Rls;
use crate::http_api::{router, HttpState};
use crate::state::State;
use ratelimit_core::store::Upkeep;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;
use tower_ratelimit::deploy::SIDE_CONNECTIONS;
use tower_ratelimit::serve::{serve as serve_hardened, RequestBody, ServeOptions};

/// How long a stop waits for calls in flight before it drops them.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A started server: its addresses, and the handle that stops it.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use ratelimit_server::{Config, Running, State};
/// use std::sync::Arc;
///
/// let config = Config::load("ratelimitd.toml".as_ref()).unwrap();
/// let options = tower_ratelimit::serve::ServeOptions::default();
/// let running = Running::start(Arc::new(State::new(&config).unwrap()), options).await?;
/// println!("gRPC on {}, HTTP on {}", running.grpc_addr, running.http_addr);
/// running.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Running {
    /// Where the gRPC service listens.
    pub grpc_addr: SocketAddr,
    /// Where the HTTP API listens.
    pub http_addr: SocketAddr,
    /// Where `GET /metrics` listens, if `[metrics]` is on.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the admin API listens, if `[admin]` is on.
    pub admin_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    http: Arc<HttpState>,
    tasks: JoinSet<()>,
}

impl Running {
    /// Binds the settings' addresses (port 0 picks a free port) and
    /// serves. Metrics install the process's Prometheus recorder
    /// ([`metrics::recorder`](crate::metrics::recorder)).
    ///
    /// Every listener is tower-ratelimit's hardened server
    /// ([`serve`](tower_ratelimit::serve)): idle, slow and half-sent
    /// connections are closed, and a connection that comes when all are
    /// taken replaces the one idle longest. `options` are the gRPC and
    /// HTTP ports' timeouts and caps, `max_connections` shared between
    /// them (half each, at least 1); the metrics and admin listeners take
    /// the same timeouts and at most [`SIDE_CONNECTIONS`] connections.
    pub async fn start(state: Arc<State>, options: ServeOptions) -> std::io::Result<Self> {
        let (grpc, http) = {
            let settings = state.settings();
            (settings.grpc, settings.http)
        };
        let grpc = TcpListener::bind(grpc).await?;
        let http = TcpListener::bind(http).await?;
        let (grpc_addr, http_addr) = (grpc.local_addr()?, http.local_addr()?);
        let (metrics_at, admin_at) = {
            let config = state.config.lock().unwrap_or_else(PoisonError::into_inner);
            let deployment = &config.deployment;
            let admin = deployment.admin.as_ref().map(|a| a.address);
            (deployment.metrics, admin)
        };
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(HttpState {
            state: Arc::clone(&state),
            ready: AtomicBool::new(true),
        });
        let mut tasks = JoinSet::new();
        let options = ServeOptions {
            shutdown_grace: DRAIN_TIMEOUT,
            ..options
        };
        let port = ServeOptions {
            max_connections: (options.max_connections / 2).max(1),
            ..options
        };
        let side = ServeOptions {
            max_connections: SIDE_CONNECTIONS,
            ..options
        };
        spawn_grpc(&mut tasks, grpc, Arc::clone(&state), port, stopped);
        let app = router(Arc::clone(&shared));
        tasks.spawn(serve_router(http, app, port, stop.subscribe()));
        let metrics_addr = match metrics_at {
            Some(addr) => {
                Some(serve(&mut tasks, addr, metrics_app()?, side, &stop, "metrics").await?)
            }
            None => None,
        };
        let admin_addr = match admin_at {
            Some(addr) => {
                let app = crate::admin::router(Arc::clone(&state));
                Some(serve(&mut tasks, addr, app, side, &stop, "admin").await?)
            }
            None => None,
        };
        tasks.spawn(upkeep(Arc::clone(&shared.state), stop.subscribe()));
        Ok(Self {
            grpc_addr,
            http_addr,
            metrics_addr,
            admin_addr,
            stop,
            http: shared,
            tasks,
        })
    }

    /// Serves until `signal`, then stops gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) {
        signal.await;
        self.stop().await;
    }

    /// Stops: `/ready` answers 503, no new calls are accepted, and calls
    /// in flight finish (for at most [`DRAIN_TIMEOUT`]).
    pub async fn stop(mut self) {
        self.http.ready.store(false, Ordering::Release);
        let _ = self.stop.send(true);
        // Each listener drops what is left after DRAIN_TIMEOUT; this is
        // the backstop.
        let backstop = DRAIN_TIMEOUT + Duration::from_secs(1);
        let drained = tokio::time::timeout(backstop, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("calls still in flight after {DRAIN_TIMEOUT:?}: dropped");
            self.tasks.abort_all();
        }
    }
}

/// Serves the gRPC rate limit service on `listener` until the stop.
fn spawn_grpc(
    tasks: &mut JoinSet<()>,
    listener: TcpListener,
    state: Arc<State>,
    options: ServeOptions,
    stopped: watch::Receiver<bool>,
) {
    let routes = tonic::service::Routes::new(Rls::new(state).into_server()).prepare();
    let signal = until_stopped(stopped);
    tasks.spawn(serve_hardened(
        listener,
        options,
        move |_peer| routes.clone(),
        signal,
    ));
}

/// Serves `app` on `listener`, each request tagged with the peer's
/// address (axum's `ConnectInfo`: `GET /check` believes trusted proxies
/// only, the admin API counts wrong tokens per source), until the stop.
async fn serve_router(
    listener: TcpListener,
    app: axum::Router,
    options: ServeOptions,
    stopped: watch::Receiver<bool>,
) {
    let tagged = move |peer: SocketAddr| {
        app.clone()
            .map_request(move |mut req: http::Request<RequestBody>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                req
            })
    };
    serve_hardened(listener, options, tagged, until_stopped(stopped)).await;
}

/// The `GET /metrics` app, with the process's Prometheus recorder
/// installed.
fn metrics_app() -> std::io::Result<axum::Router> {
    let handle = crate::metrics::recorder().map_err(std::io::Error::other)?;
    Ok(crate::metrics::router(handle))
}

/// Serves `app` on `addr` with `options` until the stop: the bound address.
async fn serve(
    tasks: &mut JoinSet<()>,
    addr: SocketAddr,
    app: axum::Router,
    options: ServeOptions,
    stop: &watch::Sender<bool>,
    what: &'static str,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "the {what} listener is on a non-loopback address: keep it behind a firewall");
    }
    tasks.spawn(serve_router(listener, app, options, stop.subscribe()));
    Ok(bound)
}

async fn until_stopped(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// Every second, each store's bounded upkeep (keys back to full dropped).
async fn upkeep(state: Arc<State>, mut stopped: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = every.tick() => {
                let now = state.now();
                for rule in state.limits().all() {
                    if let Some(store) = &rule.store {
                        store.maintain(now);
                    }
                }
            }
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
