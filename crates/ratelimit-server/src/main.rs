//! `ratelimitd`: reads its configuration, serves gRPC and HTTP, reloads on SIGHUP, stops on SIGTERM or ctrl-c.

use ratelimit_server::{Config, ConfigFileError, Reloaded, Running, State};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "usage: ratelimitd [--config PATH]

  --config PATH   the TOML configuration (or RATELIMIT_CONFIG); default ratelimitd.toml
environment (each over the file):
  BIND_ADDR             the HTTP address ([server] http)
  GRPC_BIND_ADDR        the gRPC address ([server] grpc)
  REDIS_URL             the Redis store ([store] url)
  REDIS_TLS_CA          a rediss:// server's CA ([store] tls-ca)
  RATELIMIT_MAX_KEYS    keys per limit in memory, or in Redis's fallback
  RATELIMIT_LEASE       local leases on Redis ([store] lease)
  TRUSTED_PROXIES       trusted proxies' CIDRs ([proxies] trusted)
  TRUSTED_PROXY_HEADER  their header ([proxies] header)
  METRICS_ADDR          the Prometheus metrics address ([metrics] address)
  ADMIN_ADDR            the admin API's address ([admin] address)
  ADMIN_TOKEN           the admin API's bearer token (or [admin] token-file)
  RUST_LOG              the log filter (default info)
signals:
  SIGHUP          reload the configuration (a bad file is refused and logged)
  SIGTERM, ctrl-c stop gracefully";

/// The configuration's path from the arguments or `RATELIMIT_CONFIG`.
fn config_path() -> Result<PathBuf, String> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" => path = Some(args.next().ok_or("--config needs a path")?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let path: PathBuf = path
        .or_else(|| std::env::var("RATELIMIT_CONFIG").ok())
        .unwrap_or_else(|| "ratelimitd.toml".into())
        .into();
    if !path.exists() {
        return Err(format!(
            "no configuration at {}: give --config PATH or RATELIMIT_CONFIG \
             (an example: crates/ratelimit-server/ratelimitd.toml)",
            path.display()
        ));
    }
    Ok(path)
}

/// The configuration at `path`, with the environment's settings over the file's.
fn load(path: &Path) -> Result<Config, String> {
    Config::load(path).map_err(|e| e.to_string())
}

/// Reloads `path` into `state` at every SIGHUP, its handler installed
/// now (SIGHUP's default action ends the process).
#[cfg(unix)]
fn reload_on_hangup(state: Arc<State>, path: PathBuf) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            log_reload(&path, state.reload_file(&path));
        }
    });
    Ok(())
}

/// No SIGHUP here: no reload.
#[cfg(not(unix))]
fn reload_on_hangup(_state: Arc<State>, _path: PathBuf) -> std::io::Result<()> {
    Ok(())
}

/// Logs a reload: each change, then the sum; or why it was refused.
fn log_reload(path: &Path, result: Result<Reloaded, ConfigFileError>) {
    match result {
        Ok(r) => {
            for c in &r.changed {
                tracing::info!(limit = %c.limit, from = %c.from, to = %c.to, "limit changed");
            }
            tracing::info!(
                file = %path.display(),
                added = ?r.added,
                removed = ?r.removed,
                changed = r.changed.len(),
                unchanged = r.unchanged,
                "configuration reloaded"
            );
        }
        Err(e) => {
            tracing::error!("configuration not reloaded (the running one stays): {e}");
        }
    }
}

/// SIGTERM or ctrl-c, their handlers installed now (a signal that comes
/// once the server listens is never the default action, which kills).
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Ctrl-c.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let path = match config_path() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("ratelimitd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = match load(&path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ratelimitd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let limits = config.limits.len();
    let signal = match shutdown_signal() {
        Ok(signal) => signal,
        Err(e) => {
            eprintln!("ratelimitd: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let state = match State::new(&config) {
        Ok(state) => Arc::new(state),
        Err(e) => {
            eprintln!("ratelimitd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = reload_on_hangup(Arc::clone(&state), path) {
        eprintln!("ratelimitd: cannot handle SIGHUP: {e}");
        return ExitCode::FAILURE;
    }
    let running = match Running::start(state).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("ratelimitd: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        grpc = %running.grpc_addr,
        metrics = ?running.metrics_addr,
        admin = ?running.admin_addr,
        limits,
        "ratelimitd listening on {} (HTTP)",
        running.http_addr
    );
    running.run_until(signal).await;
    tracing::info!("ratelimitd stopped");
    ExitCode::SUCCESS
}
