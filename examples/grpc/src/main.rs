//! `grpc-example`: a tonic server on `BIND_ADDR` (default
//! `127.0.0.1:50051`) serving `grpc.health.v1.Health` and `demo.v1.Echo`,
//! with 5 `Health/Check` calls per minute per client IP and 60 `Echo/Say`
//! calls, keeping at most `RATELIMIT_MAX_KEYS` client IPs per limit
//! (default 1,000,000). Behind proxies, `TRUSTED_PROXIES` and
//! `TRUSTED_PROXY_HEADER` as in the other examples. Logs go to stderr,
//! filtered by `RUST_LOG` (default `info`), as JSON lines with
//! `LOG_FORMAT=json`; Prometheus metrics on `METRICS_ADDR` (off unless set).

use grpc_example::{Config, ServeOptions};
use tower_ratelimit::serve::{self, EnvError};

#[tokio::main]
async fn main() {
    if let Err(e) = serve::init_logs() {
        fail(2, &e.to_string());
    }
    if let Err(e) = hyper_example::metrics::serve_metrics_from_env() {
        fail(2, &e.to_string());
    }
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:50051".to_owned());
    let config = Config::from_env().unwrap_or_else(|e: EnvError| fail(2, &e.to_string()));
    serve::warn_of_public_proxies(&config.client_ip);
    if let Err(e) = grpc_example::rate_limit(&config) {
        fail(2, &e.to_string());
    }
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => fail(1, &format!("cannot listen on {bind}: {e}")),
    };
    let options = ServeOptions::default();
    tracing::info!(
        limits = ?config.limits,
        trusted_proxies = ?config.client_ip.trusted(),
        "limits in memory, per client IP"
    );
    tracing::info!(?options, "serving");
    let addr = listener.local_addr().map_or(bind, |a| a.to_string());
    let shutdown = serve::shutdown_signal();
    tracing::info!("grpc-example listening on {addr}");
    if let Err(e) = grpc_example::run(listener, &config, options, shutdown).await {
        tracing::error!(error = %e, "server failed");
        std::process::exit(1);
    }
    tracing::info!("stopped");
}

fn fail(code: i32, message: &str) -> ! {
    // Logs may not be set up yet: straight to stderr.
    eprintln!("grpc-example: {message}");
    std::process::exit(code);
}
