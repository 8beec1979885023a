//! `axum-example`: serves [`axum_example::app`] on `BIND_ADDR`
//! (default `127.0.0.1:3000`), trusting the proxies in `TRUSTED_PROXIES`
//! and reading only the header named by `TRUSTED_PROXY_HEADER`.
//! With `REDIS_URL` set (`redis://host:port/db`, `rediss://` with
//! `REDIS_TLS_CA` naming a private CA's PEM file,
//! `redis+sentinel://host:port[,...]/service`, or a comma-separated list of
//! a Cluster's `redis://` node URLs), the limits live in Redis
//! and every copy of the app shares them (`RATELIMIT_LEASE=n`: local
//! leases of `n` units, see `RedisStores::lease`); otherwise they are in memory, at
//! most `RATELIMIT_MAX_KEYS` keys per limit (default 1,000,000). `API_KEYS`
//! lists the valid API keys (none by default). HTTP/1.1 and h2c on one
//! port, at most `MAX_CONNECTIONS` connections (default 10,000, kept below
//! the open-file limit) and `MAX_CONNECTIONS_PER_CLIENT` per client IP
//! (default 100; no cap of its own with `TRUSTED_PROXIES`). Logs go to stderr, filtered
//! by `RUST_LOG` (default `info`), as JSON lines with `LOG_FORMAT=json`;
//! Prometheus metrics on `METRICS_ADDR` (off unless set); the admin API
//! on `ADMIN_ADDR` with the bearer token `ADMIN_TOKEN` (off unless set;
//! see [`axum_example::admin`]).

use axum_example::admin::{serve_admin, AdminSettings};
use axum_example::server::{self, ServeOptions};
use axum_example::{app_with_policy, ApiKeys, MemoryStores, RedisStores, POLICY_FILE};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::policy::PolicyTable;

#[tokio::main]
async fn main() {
    if let Err(e) = server::init_logs() {
        fail(2, &e.to_string());
    }
    if let Err(e) = hyper_example::metrics::serve_metrics_from_env() {
        fail(2, &e.to_string());
    }
    let mut config = match axum_example::Config::from_env() {
        Ok(config) => config,
        Err(e) => fail(2, &e.to_string()),
    };
    server::warn_of_public_proxies(&config.client_ip);
    config.api_keys = ApiKeys::from_env().unwrap_or_else(|e| fail(2, &e.to_string()));
    let max_keys =
        hyper_example::max_keys::max_keys_from_env().unwrap_or_else(|e| fail(2, &e.to_string()));
    let admin = AdminSettings::from_env().unwrap_or_else(|e| fail(2, &e.to_string()));
    // The limits: $RATELIMIT_CONFIG, or the shipped ratelimit.toml.
    let policy_path = std::env::var_os("RATELIMIT_CONFIG")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(POLICY_FILE), PathBuf::from);
    let policy = PolicyTable::load(&policy_path)
        .unwrap_or_else(|e| fail(2, &format!("RATELIMIT_CONFIG: {e}")));
    let app = match std::env::var("REDIS_URL") {
        Ok(url) => match RedisStores::open(&url, tls_ca_from_env().as_deref()) {
            Ok(stores) => {
                tracing::info!("every copy names a key alike: long keys by their digest, secret keys with the key secret shared in Redis");
                tracing::info!(
                    redis = %stores.target(),
                    fallback_max_keys = max_keys,
                    "limits in Redis (REDIS_URL), shared by every copy; in memory while Redis is away"
                );
                let stores = match std::env::var("RATELIMIT_LEASE") {
                    Ok(n) => match n.trim().parse::<u64>() {
                        Ok(size) => {
                            tracing::warn!(size, "local leases on (RATELIMIT_LEASE): limits may be exceeded by copies * (size - 1) per window");
                            stores.lease(size)
                        }
                        Err(e) => fail(2, &format!("RATELIMIT_LEASE={n:?}: {e}")),
                    },
                    Err(_) => stores,
                };
                let entries = stores.entries();
                let app = app_with_policy(&config, &stores.max_keys(max_keys), &policy);
                (app, Some(entries))
            }
            Err(e @ ratelimit_redis::RedisBuildError::TlsCa(_)) => {
                fail(2, &format!("REDIS_TLS_CA: {e}"))
            }
            Err(e) => fail(2, &format!("REDIS_URL: {e}")),
        },
        Err(_) => {
            tracing::info!(max_keys, "limits in memory (set REDIS_URL to share them)");
            let app = app_with_policy(&config, &MemoryStores::new(max_keys), &policy);
            (app, None)
        }
    };
    let (app, entries) = app;
    let (app, limits) = app.unwrap_or_else(|mut e| {
        e.file = e.file.or_else(|| Some(policy_path.clone()));
        fail(2, &format!("RATELIMIT_CONFIG: {e}"))
    });
    // Reloaded on SIGHUP and when the file changes; kept alive until exit.
    let limits = Arc::new(limits);
    // The admin API's run-time entries, shared through Redis by every copy.
    if let Some(entries) = entries {
        let entries = entries.unwrap_or_else(|e| fail(2, &format!("REDIS_URL: {e}")));
        if let Err(e) = limits.share(Arc::new(entries)) {
            fail(2, &e);
        }
    }
    limits.watch(&policy_path, Duration::from_millis(250));
    if let Some(admin) = &admin {
        if let Err(e) = serve_admin(Arc::clone(&limits), admin).await {
            fail(1, &e.to_string());
        }
    }
    tracing::info!(
        file = %policy_path.display(),
        "rate limits from the policy file (reloaded on SIGHUP and on change)"
    );
    for entry in policy.entries() {
        let routes: Vec<String> = entry.routes.iter().map(ToString::to_string).collect();
        tracing::info!(
            limit = %entry.name,
            algorithm = %entry.algorithm,
            key = %entry.key,
            routes = %routes.join(", "),
            mode = ?entry.mode,
            overrides = entry.overrides.len(),
            "rate limit in force"
        );
    }
    let proxies = std::env::var("TRUSTED_PROXIES").unwrap_or_default();
    let header = config.client_ip.proxy_header();
    if proxies.trim().is_empty() {
        tracing::info!("no trusted proxies (TRUSTED_PROXIES): clients keyed by their TCP peer");
        if std::env::var_os("TRUSTED_PROXY_HEADER").is_some() {
            tracing::warn!(
                ?header,
                "TRUSTED_PROXY_HEADER is set but TRUSTED_PROXIES is not: the header is never read"
            );
        }
    } else {
        tracing::info!(
            trusted_proxies = %proxies.trim(),
            ?header,
            "trusting this header from these proxies only"
        );
    }
    if config.api_keys.is_empty() {
        tracing::info!("no API keys (API_KEYS): every X-API-Key is answered 401");
    } else {
        tracing::info!(
            api_keys = config.api_keys.len(),
            "API keys loaded (API_KEYS)"
        );
    }
    // Behind proxies every connection comes from one of them: no cap per
    // client of its own unless MAX_CONNECTIONS_PER_CLIENT says so.
    let options = ServeOptions::from_env(!proxies.trim().is_empty())
        .unwrap_or_else(|e| fail(2, &e.to_string()));
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => fail(1, &format!("cannot listen on {bind}: {e}")),
    };
    tracing::info!(?options, "serving");
    let addr = listener.local_addr().map_or(bind, |a| a.to_string());
    let shutdown = server::shutdown_signal();
    tracing::info!("axum-example listening on {addr}");
    axum_example::run(listener, app, options, shutdown).await;
    drop(limits);
    tracing::info!("stopped");
}

fn fail(code: i32, message: &str) -> ! {
    // Logs may not be set up yet: straight to stderr.
    eprintln!("axum-example: {message}");
    std::process::exit(code);
}

/// `REDIS_TLS_CA`: the PEM file of a private CA for `rediss://` (unset or
/// empty: the web roots).
fn tls_ca_from_env() -> Option<PathBuf> {
    std::env::var_os("REDIS_TLS_CA")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}
