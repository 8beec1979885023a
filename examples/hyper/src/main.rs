//! `hyper-example`: a plain hyper server on `BIND_ADDR` (default
//! `127.0.0.1:3001`) with a global limit (GitHub's 5,000 per hour) and a
//! per-IP daily cap (200 per day), keeping at most `RATELIMIT_MAX_KEYS`
//! client IPs (default 1,000,000), serving HTTP/1.1 and h2c on one port,
//! at most `MAX_CONNECTIONS` connections (default 10,000, kept below the
//! open-file limit) and `MAX_CONNECTIONS_PER_CLIENT` per client IP
//! (default 100). Logs go to stderr, filtered by
//! `RUST_LOG` (default `info`), as JSON lines with `LOG_FORMAT=json`;
//! Prometheus metrics on `METRICS_ADDR` (off unless set).

use hyper_example::max_keys::max_keys_from_env;
use hyper_example::Limits;
use tower_ratelimit::serve::{self, EnvError, ServeOptions};

#[tokio::main]
async fn main() {
    if let Err(e) = serve::init_logs() {
        fail(2, &e.to_string());
    }
    if let Err(e) = hyper_example::metrics::serve_metrics_from_env() {
        fail(2, &e.to_string());
    }
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3001".to_owned());
    let limits = Limits {
        max_keys: max_keys_from_env().unwrap_or_else(|e: EnvError| fail(2, &e.to_string())),
        ..Limits::default()
    };
    let svc = hyper_example::service(limits).unwrap_or_else(|e| fail(2, &e.to_string()));
    let options = ServeOptions::from_env(false).unwrap_or_else(|e| fail(2, &e.to_string()));
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => fail(1, &format!("cannot listen on {bind}: {e}")),
    };
    tracing::info!(
        global = limits.global,
        global_window = ?limits.global_window,
        per_ip = limits.per_ip,
        per_ip_window = ?limits.per_ip_window,
        max_keys = limits.max_keys,
        "limits in memory"
    );
    tracing::info!(?options, "serving");
    let addr = listener.local_addr().map_or(bind, |a| a.to_string());
    let shutdown = serve::shutdown_signal();
    tracing::info!("hyper-example listening on {addr}");
    hyper_example::run(listener, svc, options, shutdown).await;
    tracing::info!("stopped");
}

fn fail(code: i32, message: &str) -> ! {
    // Logs may not be set up yet: straight to stderr.
    eprintln!("hyper-example: {message}");
    std::process::exit(code);
}
