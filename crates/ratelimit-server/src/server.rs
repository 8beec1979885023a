//! The running server: its listeners (gRPC, HTTP, metrics and admin if configured), store upkeep, and a graceful stop.

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
/// let running = Running::start(Arc::new(State::new(&config).unwrap())).await?;
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
    pub async fn start(state: Arc<State>) -> std::io::Result<Self> {
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
        spawn_grpc(&mut tasks, grpc, Arc::clone(&state), stopped);
        spawn_http(&mut tasks, http, Arc::clone(&shared), stop.subscribe());
        let metrics_addr = match metrics_at {
            Some(addr) => Some(serve(&mut tasks, addr, metrics_app()?, &stop, "metrics").await?),
            None => None,
        };
        let admin_addr = match admin_at {
            Some(addr) => {
                let app = crate::admin::router(Arc::clone(&state));
                Some(serve(&mut tasks, addr, app, &stop, "admin").await?)
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
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
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
    stopped: watch::Receiver<bool>,
) {
    let signal = until_stopped(stopped);
    let rls = Rls::new(state).into_server();
    tasks.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let served = tonic::transport::Server::builder()
            .add_service(rls)
            .serve_with_incoming_shutdown(incoming, signal)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the gRPC server failed");
        }
    });
}

/// Serves the HTTP API on `listener` until the stop.
fn spawn_http(
    tasks: &mut JoinSet<()>,
    listener: TcpListener,
    shared: Arc<HttpState>,
    stopped: watch::Receiver<bool>,
) {
    // Each peer's address: `GET /check` believes trusted proxies only.
    let app = router(shared).into_make_service_with_connect_info::<SocketAddr>();
    let signal = until_stopped(stopped);
    tasks.spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the HTTP server failed");
        }
    });
}

/// The `GET /metrics` app, with the process's Prometheus recorder
/// installed.
fn metrics_app() -> std::io::Result<axum::Router> {
    let handle = crate::metrics::recorder().map_err(std::io::Error::other)?;
    Ok(crate::metrics::router(handle))
}

/// Serves `app` on `addr` (with each peer's address, for the admin
/// API's per-source count of wrong tokens) until the stop: the bound address.
async fn serve(
    tasks: &mut JoinSet<()>,
    addr: SocketAddr,
    app: axum::Router,
    stop: &watch::Sender<bool>,
    what: &'static str,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "the {what} listener is on a non-loopback address: keep it behind a firewall");
    }
    let signal = until_stopped(stop.subscribe());
    tasks.spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the {what} server failed");
        }
    });
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
