//! `ratelimitd`: reads its configuration, serves gRPC and HTTP, reloads on SIGHUP, stops on SIGTERM or ctrl-c.

use ratelimit_redis::{StoreSettings, Target};
use ratelimit_server::{Config, ConfigFileError, Reloaded, Running, State};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tower_ratelimit::serve::ServeOptions;

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
  MAX_CONNECTIONS       connections at once, half on the gRPC port, half on HTTP
                        (default 10000, kept below the open-file limit)
  RUST_LOG              the log filter (default info)
signals:
  SIGHUP          reload the configuration (a bad file is refused and logged)
  SIGTERM, ctrl-c stop gracefully";

/// The exit code of a bad argument, configuration file or variable:
/// nothing was started. A failure while starting or running (an address
/// in use) exits with 1.
const CONFIG_ERROR: u8 = 2;

/// The configuration's path from the arguments or `RATELIMIT_CONFIG`;
/// `Ok(None)` for `--help` (the usage is printed).
fn config_path() -> Result<Option<PathBuf>, String> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" => path = Some(args.next().ok_or("--config needs a path")?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
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
    Ok(Some(path))
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
                settings = ?r.settings,
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

/// The file's path, the configuration, its state and the listeners'
/// options.
type Configured = (PathBuf, Config, Arc<State>, ServeOptions);

/// The configuration and the state it makes, or the exit code and why
/// not (every fault here is the configuration's: [`CONFIG_ERROR`]);
/// `Ok(None)` for `--help`.
fn configured() -> Result<Option<Configured>, (u8, String)> {
    let bad = |e: String| (CONFIG_ERROR, e);
    let Some(path) = config_path().map_err(bad)? else {
        return Ok(None);
    };
    let config = load(&path).map_err(bad)?;
    let state = State::new(&config).map_err(|e| bad(e.to_string()))?;
    // Every caller is a proxy: no cap per client, only the global one.
    let options = ServeOptions::from_env(true).map_err(|e| bad(e.to_string()))?;
    Ok(Some((path, config, Arc::new(state), options)))
}

/// One line of what the configuration puts in force besides the limits:
/// the store (a Redis URL with its password masked), its caps, the
/// trusted proxies. No secret: no password, token or key secret.
fn log_configuration(config: &Config) {
    let store = match &config.deployment.store {
        StoreSettings::Memory { max_keys } => match max_keys {
            Some(n) => format!("memory, at most {n} keys per limit"),
            None => "memory, no cap on keys".to_owned(),
        },
        StoreSettings::Redis {
            url,
            fallback_max_keys,
            lease,
            ..
        } => {
            let target = Target::parse(url, None).map_or_else(
                |_| "redis (its URL not shown)".to_owned(),
                |t| format!("redis at {t}"),
            );
            let fallback = fallback_max_keys.map_or_else(
                || "no fallback".to_owned(),
                |n| format!("a memory fallback of at most {n} keys per limit"),
            );
            let lease = lease.map_or_else(|| "no leases".to_owned(), |n| format!("leases of {n}"));
            format!("{target}, {fallback}, {lease}")
        }
        _ => "a store of another kind".to_owned(),
    };
    let proxies = config.deployment.client_ip.as_ref().map_or_else(
        || "none: GET /check keys on the peer's address".to_owned(),
        |c| {
            let trusted: Vec<String> = c.trusted().iter().map(ToString::to_string).collect();
            format!(
                "{} (header {})",
                trusted.join(", "),
                c.proxy_header().name()
            )
        },
    );
    let server = &config.server;
    tracing::info!(
        store = %store,
        proxies = %proxies,
        headers = server.headers,
        refuse_status = server.refuse_status,
        "configuration in force"
    );
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let (path, config, state, options) = match configured() {
        Ok(Some(configured)) => configured,
        Ok(None) => return ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!("ratelimitd: {e}");
            return ExitCode::from(code);
        }
    };
    match serve(path, &config, state, options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ratelimitd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Installs the signal handlers, listens, and serves until SIGTERM or
/// ctrl-c; an error says what failed.
async fn serve(
    path: PathBuf,
    config: &Config,
    state: Arc<State>,
    options: ServeOptions,
) -> Result<(), String> {
    let signal = shutdown_signal().map_err(|e| format!("cannot handle signals: {e}"))?;
    reload_on_hangup(Arc::clone(&state), path).map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    let running = Running::start(state, options)
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    tracing::info!(
        grpc = %running.grpc_addr,
        metrics = ?running.metrics_addr,
        admin = ?running.admin_addr,
        limits = config.limits.len(),
        "ratelimitd listening on {} (HTTP)",
        running.http_addr
    );
    log_configuration(config);
    running.run_until(signal).await;
    tracing::info!("ratelimitd stopped");
    Ok(())
}
