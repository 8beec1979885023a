//! `axum-example`: loads the deployment file (`$RATELIMIT_CONFIG`, or the
//! shipped `examples/axum/ratelimit.toml`) with the README's settings
//! table over it, builds [`axum_example::app_on`] with the API keys of
//! `API_KEYS`, and serves it with [`Limits::serve`]: on `BIND_ADDR`
//! (default `127.0.0.1:3000`), HTTP/1.1 and h2c, the admin API on
//! `ADMIN_ADDR` and metrics on `METRICS_ADDR` when set, until SIGTERM or
//! Ctrl-C. Logs go to stderr, filtered by `RUST_LOG` (default `info`),
//! as JSON lines with `LOG_FORMAT=json`. A bad setting stops it with
//! exit code 2 and a message naming it; an address it cannot listen on,
//! with exit code 1.

use axum_example::{app_on, ApiKeys, Config, POLICY_FILE};
use tower_ratelimit::{deploy::DeployError, deploy::Limits, serve};

#[tokio::main]
async fn main() {
    serve::init_logs().unwrap_or_else(|e| fail(2, e));
    let limits = Limits::load(POLICY_FILE).await.unwrap_or_else(refused);
    let api_keys = ApiKeys::from_env().unwrap_or_else(|e| fail(2, e));
    let config = Config {
        api_keys,
        clock: None,
    };
    let app = app_on(&limits, &config).unwrap_or_else(refused);
    limits.serve(app).await.unwrap_or_else(|e| fail(1, e));
}

/// Stops on a bad file or setting, naming it.
fn refused<T>(e: DeployError) -> T {
    match e {
        DeployError::File(_) => fail(2, format!("RATELIMIT_CONFIG: {e}")),
        _ => fail(2, e),
    }
}

fn fail(code: i32, message: impl std::fmt::Display) -> ! {
    // Logs may not be set up yet: straight to stderr.
    eprintln!("axum-example: {message}");
    std::process::exit(code);
}
