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
    let path = path
        .or_else(|| std::env::var("RATELIMIT_CONFIG").ok())
        .unwrap_or_else(|| "ratelimitd.toml".into());
    Ok(path.into())
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

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let config = match load() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ratelimitd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let limits = config.limits.len();
    let running = match Running::start(Arc::new(State::new(&config))).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("ratelimitd: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(grpc = %running.grpc_addr, http = %running.http_addr, limits, "ratelimitd serving");
    running.run_until(shutdown_signal()).await;
    tracing::info!("ratelimitd stopped");
    ExitCode::SUCCESS
}
