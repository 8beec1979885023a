//! Logs to stderr (`init_logs`), filtered by `RUST_LOG`, as text or JSON.

use super::env_error::EnvError;
use std::io;

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as text, or
/// with `LOG_FORMAT=json` as one JSON object per line. A `RUST_LOG` that
/// does not parse, or a `LOG_FORMAT` other than `text` or `json`, is an
/// error naming it.
pub fn init_logs() -> Result<(), EnvError> {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let json = match std::env::var("LOG_FORMAT") {
        Err(_) => false,
        Ok(v) => match v.trim() {
            "" | "text" => false,
            "json" => true,
            _ => {
                return Err(EnvError::new(
                    "LOG_FORMAT",
                    Some(v),
                    "expected text or json",
                ))
            }
        },
    };
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .map_err(|e| EnvError::new("RUST_LOG", std::env::var("RUST_LOG").ok(), e))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    Ok(())
}
