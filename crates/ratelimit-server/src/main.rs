//! `ratelimitd`: reads its configuration, serves gRPC and HTTP, stops on SIGTERM or ctrl-c.

use ratelimit_server::{Config, Running, State};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "usage: ratelimitd [--config PATH]

  --config PATH   the TOML configuration (or RATELIMIT_CONFIG); default ratelimitd.toml
environment:
  BIND_ADDR       the HTTP address, over [server] http
  GRPC_BIND_ADDR  the gRPC address, over [server] grpc
  RUST_LOG        the log filter (default info)";

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

/// The configuration, with the environment's addresses over the file's.
fn load() -> Result<Config, String> {
    let path = config_path()?;
    let mut config = Config::load(&path).map_err(|e| e.to_string())?;
    for (var, addr) in [
        ("BIND_ADDR", &mut config.server.http),
        ("GRPC_BIND_ADDR", &mut config.server.grpc),
    ] {
        if let Ok(text) = std::env::var(var) {
            *addr = text
                .parse()
                .map_err(|_| format!("{var}={text:?} is not an address like 127.0.0.1:8080"))?;
        }
    }
    Ok(config)
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
    let config = match load() {
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
    let running = match Running::start(state).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("ratelimitd: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        grpc = %running.grpc_addr,
        limits,
        "ratelimitd listening on {} (HTTP)",
        running.http_addr
    );
    running.run_until(signal).await;
    tracing::info!("ratelimitd stopped");
    ExitCode::SUCCESS
}
