//! Serving a deployment (`Server`, `Limits::serve`): the app, the admin
//! API and the metrics, each on a listener of its own hardened by
//! [`serve`](crate::serve), until a shutdown signal; open requests may
//! finish.

use super::error::DeployError;
use super::limits::Limits;
use crate::serve::{self, RequestBody, ServeOptions};
use axum::extract::ConnectInfo;
use axum::Router;
use http::Request;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

/// Connections the admin API's and the metrics' listeners each serve at
/// once (the connection idle longest makes room for a new one).
pub const SIDE_CONNECTIONS: usize = 64;

/// The listeners of a deployment, bound: the app's, and the admin API's
/// and the metrics' when they are on. [`run`](Self::run) serves them.
///
/// ```no_run
/// use axum::{routing::get, Router};
/// use tower_ratelimit::deploy::Limits;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let limits = Limits::load("ratelimit.toml").await?;
/// let app = limits.apply(Router::new().route("/", get(|| async { "hi" })))?;
/// let mut server = limits.bind(app).await?; // BIND_ADDR, ADMIN_ADDR, METRICS_ADDR
/// server.options_mut().request_timeout = std::time::Duration::from_secs(60);
/// println!("on {}", server.local_addr());
/// server.run(tower_ratelimit::serve::shutdown_signal()).await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Server {
    app: Listener,
    admin: Option<Listener>,
    metrics: Option<Listener>,
}

/// One bound listener and the router it serves.
#[derive(Debug)]
struct Listener {
    listener: TcpListener,
    addr: SocketAddr,
    router: Router,
    options: ServeOptions,
}

impl Listener {
    /// Binds `addr` for `router`; the error names `what` sets the address.
    async fn bind(
        what: &'static str,
        addr: SocketAddr,
        router: Router,
        options: ServeOptions,
    ) -> Result<Self, DeployError> {
        let failed = |e: std::io::Error| DeployError::Listen {
            what,
            addr,
            message: e.to_string(),
        };
        let listener = TcpListener::bind(addr).await.map_err(failed)?;
        let addr = listener.local_addr().map_err(failed)?;
        Ok(Self {
            listener,
            addr,
            router,
            options,
        })
    }

    /// Serves the router, each request tagged with the peer's address as
    /// axum's `ConnectInfo`, until `shutdown`.
    async fn serve(self, shutdown: impl Future<Output = ()>) {
        let router = self.router;
        let tagged = move |peer: SocketAddr| {
            router
                .clone()
                .map_request(move |mut req: Request<RequestBody>| {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    req
                })
        };
        serve::serve(self.listener, self.options, tagged, shutdown).await;
    }
}

impl Limits {
    /// Serves `app` (the router [`apply`](Self::apply) returned) until
    /// `SIGTERM` or Ctrl-C, then lets open requests finish: [`bind`](Self::bind)
    /// and [`Server::run`] with [`serve::shutdown_signal`].
    pub async fn serve(&self, app: Router) -> Result<(), DeployError> {
        // Installed before the listeners say they listen: a signal sent
        // as soon as they do is not lost.
        let shutdown = serve::shutdown_signal();
        self.bind(app).await?.run(shutdown).await;
        Ok(())
    }

    /// Binds the listeners: `app` on `[server] addr` or `BIND_ADDR`
    /// (default 127.0.0.1:3000) with the connection caps of `[server]`,
    /// `MAX_CONNECTIONS` and `MAX_CONNECTIONS_PER_CLIENT`; the admin API
    /// and the metrics on their addresses when they are on, each with
    /// the same timeouts and at most [`SIDE_CONNECTIONS`] connections.
    pub async fn bind(&self, app: Router) -> Result<Server, DeployError> {
        let settings = &self.inner.server;
        let app = Listener::bind(
            "BIND_ADDR, [server] addr",
            settings.addr,
            app,
            settings.options,
        );
        let app = app.await?;
        // One client (the operator's host, Prometheus) may hold every
        // slot: the connection idle longest makes room for a new one.
        let side = ServeOptions {
            max_connections: SIDE_CONNECTIONS,
            ..ServeOptions::default()
        };
        let admin = match (self.admin_addr(), self.admin_router()) {
            (Some(addr), Some(router)) => {
                let what = "ADMIN_ADDR, [admin] address";
                let admin = Listener::bind(what, addr, router, side).await?;
                if !admin.addr.ip().is_loopback() {
                    tracing::warn!(addr = %admin.addr, "admin API on a non-loopback address: keep it behind a firewall");
                }
                let from = settings.from[1];
                tracing::info!(addr = %admin.addr, from, "admin API, bearer token required");
                Some(admin)
            }
            _ => None,
        };
        #[cfg(not(feature = "prometheus"))]
        let metrics = None;
        #[cfg(feature = "prometheus")]
        let metrics = match self.metrics_router() {
            Some(router) => {
                let addr = self.metrics_addr().unwrap_or(settings.addr);
                let what = "METRICS_ADDR, [metrics] address";
                let metrics = Listener::bind(what, addr, router, side).await?;
                let from = settings.from[2];
                tracing::info!(addr = %metrics.addr, from, "Prometheus metrics at GET /metrics");
                Some(metrics)
            }
            None => None,
        };
        // Last: a process watching its log for this line finds every
        // listener bound.
        tracing::info!(options = ?app.options, "serving");
        tracing::info!(from = settings.from[0], "listening on {}", app.addr);
        Ok(Server {
            app,
            admin,
            metrics,
        })
    }
}

impl Server {
    /// Where the app is served (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.app.addr
    }

    /// Where the admin API is served, when it is on.
    pub fn admin_local_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|l| l.addr)
    }

    /// Where the metrics are served, when they are on.
    pub fn metrics_local_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|l| l.addr)
    }

    /// How the app's listener protects itself, to change in code what
    /// the file does not say (a longer request timeout for slow
    /// handlers, say).
    pub fn options_mut(&mut self) -> &mut ServeOptions {
        &mut self.app.options
    }

    /// Serves every listener until `shutdown` completes; then no new
    /// connection is taken, and open ones get
    /// [`ServeOptions::shutdown_grace`] to finish their requests.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop, stopped) = watch::channel(false);
        let side: Vec<_> = [self.admin, self.metrics]
            .into_iter()
            .flatten()
            .map(|listener| {
                let mut stopped = stopped.clone();
                tokio::spawn(listener.serve(async move {
                    let _ = stopped.wait_for(|&stop| stop).await;
                }))
            })
            .collect();
        let shutdown = async {
            shutdown.await;
            stop.send_replace(true);
        };
        self.app.serve(shutdown).await;
        for task in side {
            let _ = task.await;
        }
        tracing::info!("stopped");
    }
}
