//! A deployment's settings (`Deployment`): the file's sections with the
//! environment's overrides, each checked.

use super::env::{Env, Origin, Setting};
use super::error::DeployError;
use super::sections::Sections;
use super::server_settings::ServerSettings;
use crate::key::{ClientIp, ProxyHeader};
use ratelimit_redis::{StoreSettings, Target};
use std::net::SocketAddr;
use std::sync::Arc;

/// The shortest admin token accepted.
pub const MIN_TOKEN: usize = 16;

/// The most keys a memory store (or a Redis fallback) may be given.
const MAX_KEYS: usize = 1_000_000_000;

/// The keys a memory store keeps state for when neither `max-keys` nor
/// `RATELIMIT_MAX_KEYS` says (the Redis fallback's too, when `REDIS_URL`
/// moves a memory store to Redis).
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// Everything a deployment runs with but its limits.
#[derive(Debug, Clone)]
pub(super) struct Deployment {
    pub(super) store: StoreSettings,
    pub(super) client_ip: Option<ClientIp>,
    pub(super) admin: Option<(SocketAddr, Token)>,
    pub(super) metrics: Option<SocketAddr>,
    pub(super) server: ServerSettings,
}

/// The admin token: compared, never shown.
#[derive(Clone)]
pub(super) struct Token(pub(super) Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Deployment {
    /// The settings of `sections` overridden by `env`.
    pub(super) fn resolve(sections: Sections, env: &Env<'_>) -> Result<Self, DeployError> {
        let metrics = match sections.metrics {
            Some(m) if m.address.is_none() && env.get("METRICS_ADDR").is_none() => {
                return Err(env.error(
                    Origin::File("[metrics] address"),
                    "missing (or set METRICS_ADDR)",
                ));
            }
            m => env.or_file(
                "METRICS_ADDR",
                "[metrics] address",
                m.and_then(|m| m.address),
            ),
        };
        if let (Some(m), false) = (&metrics, cfg!(feature = "prometheus")) {
            return Err(env.error(
                m.origin,
                "metrics need tower-ratelimit's feature `prometheus`",
            ));
        }
        let metrics = metrics.map(|m| m.parse(env)).transpose()?;
        let client_ip = proxies(sections.proxies, env)?;
        Ok(Self {
            store: store(sections.store.unwrap_or_default(), env)?,
            server: ServerSettings::resolve(sections.server, env, client_ip.is_some())?,
            client_ip,
            admin: admin(sections.admin, env)?,
            metrics,
        })
    }
}

/// `[store]` with `REDIS_URL`, `REDIS_TLS_CA`, `RATELIMIT_MAX_KEYS` and
/// `RATELIMIT_LEASE` over it.
fn store(mut store: StoreSettings, env: &Env<'_>) -> Result<StoreSettings, DeployError> {
    let mut url_origin = Origin::File("[store] url");
    if let Some(url) = env.get("REDIS_URL") {
        url_origin = Origin::Env("REDIS_URL");
        match &mut store {
            StoreSettings::Redis { url: file_url, .. } => *file_url = url,
            // Memory's cap becomes the fallback's: while Redis fails,
            // each instance decides in memory as it did before.
            StoreSettings::Memory { max_keys } => {
                let cap = max_keys.unwrap_or(DEFAULT_MAX_KEYS);
                store = StoreSettings::redis(url);
                if let StoreSettings::Redis {
                    fallback_max_keys, ..
                } = &mut store
                {
                    *fallback_max_keys = Some(cap);
                }
            }
            _ => store = StoreSettings::redis(url),
        }
    }
    let redis_only = |var: &'static str| {
        env.error(
            Origin::Env(var),
            "needs a Redis store (REDIS_URL, or [store] kind = \"redis\")",
        )
    };
    let max_keys = env
        .setting("RATELIMIT_MAX_KEYS")
        .map(|s| max_keys(&s, env))
        .transpose()?;
    let lease = env
        .setting("RATELIMIT_LEASE")
        .map(|s| s.parse::<u64>(env))
        .transpose()?;
    let tls = env.get("REDIS_TLS_CA");
    match &mut store {
        StoreSettings::Redis {
            url,
            tls_ca,
            fallback_max_keys,
            lease: file_lease,
            ..
        } => {
            if let Some(ca) = tls {
                *tls_ca = Some(ca.into());
            }
            if max_keys.is_some() {
                *fallback_max_keys = max_keys;
            }
            if let Some(size) = lease {
                *file_lease = (size >= 2).then_some(size);
            }
            if let Err(e) = Target::parse(url, tls_ca.as_deref()) {
                let tls_env = env.get("REDIS_TLS_CA").is_some();
                let origin = match e {
                    ratelimit_redis::RedisBuildError::TlsCa(_) if tls_env => {
                        Origin::Env("REDIS_TLS_CA")
                    }
                    ratelimit_redis::RedisBuildError::TlsCa(_) => Origin::File("[store] tls-ca"),
                    _ => url_origin,
                };
                return Err(env.error(origin, e));
            }
        }
        StoreSettings::Memory { max_keys: file_max } => {
            if tls.is_some() {
                return Err(redis_only("REDIS_TLS_CA"));
            }
            if lease.is_some() {
                return Err(redis_only("RATELIMIT_LEASE"));
            }
            if max_keys.is_some() {
                *file_max = max_keys;
            }
            file_max.get_or_insert(DEFAULT_MAX_KEYS);
        }
        _ => {}
    }
    Ok(store)
}

/// `RATELIMIT_MAX_KEYS`: a whole number from 1 to [`MAX_KEYS`].
fn max_keys(setting: &Setting, env: &Env<'_>) -> Result<usize, DeployError> {
    let n: usize = setting.parse(env)?;
    if (1..=MAX_KEYS).contains(&n) {
        Ok(n)
    } else {
        Err(env.error(setting.origin, format!("{n}: expected 1 to {MAX_KEYS}")))
    }
}

/// `[proxies]` with `TRUSTED_PROXIES` and `TRUSTED_PROXY_HEADER` over it;
/// `None` when no proxy is trusted.
fn proxies(
    file: Option<super::sections::Proxies>,
    env: &Env<'_>,
) -> Result<Option<ClientIp>, DeployError> {
    let (trusted, header) = file.map_or((None, None), |p| {
        (
            Some(p.trusted.join(",")).filter(|t| !t.is_empty()),
            p.header,
        )
    });
    let trusted = env.or_file("TRUSTED_PROXIES", "[proxies] trusted", trusted);
    let header = env.or_file("TRUSTED_PROXY_HEADER", "[proxies] header", header);
    let Some(trusted) = trusted else {
        return match header {
            Some(h) => Err(env.error(h.origin, "no proxy is trusted (TRUSTED_PROXIES, [proxies] trusted): the header would never be read")),
            None => Ok(None),
        };
    };
    let client_ip = ClientIp::from_list(&trusted.text).map_err(|e| env.error(trusted.origin, e))?;
    Ok(Some(match header {
        Some(h) => client_ip.header(h.parse::<ProxyHeader>(env)?),
        None => client_ip,
    }))
}

/// `[admin]` with `ADMIN_ADDR` and `ADMIN_TOKEN` over it: off unless an
/// address is set, and then a token is required.
fn admin(
    file: Option<super::sections::Admin>,
    env: &Env<'_>,
) -> Result<Option<(SocketAddr, Token)>, DeployError> {
    let (addr, token_env, token_file) = match file {
        Some(a) => {
            if a.address.is_none() && env.get("ADMIN_ADDR").is_none() {
                return Err(env.error(
                    Origin::File("[admin] address"),
                    "missing (or set ADMIN_ADDR)",
                ));
            }
            (a.address, a.token_env, a.token_file)
        }
        None => (None, None, None),
    };
    let Some(address) = env.address("ADMIN_ADDR", "[admin] address", addr)? else {
        return Ok(None);
    };
    let token = match (env.get("ADMIN_TOKEN"), token_env, token_file) {
        (Some(token), _, _) => (token, Origin::Env("ADMIN_TOKEN")),
        (None, Some(var), _) => match env.get(&var) {
            Some(token) => (token, Origin::File("[admin] token-env")),
            None => {
                return Err(env.error(Origin::File("[admin] token-env"), format!("{var} is unset")))
            }
        },
        (None, None, Some(path)) => match std::fs::read_to_string(&path) {
            Ok(token) => (token.trim().to_owned(), Origin::File("[admin] token-file")),
            Err(e) => {
                return Err(env.error(
                    Origin::File("[admin] token-file"),
                    format!("{}: {e}", path.display()),
                ))
            }
        },
        (None, None, None) => {
            return Err(env.error(
                Origin::Env("ADMIN_TOKEN"),
                "required when the admin API is on (ADMIN_ADDR, [admin] address)",
            ))
        }
    };
    if token.0.len() < MIN_TOKEN || !token.0.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(env.error(
            token.1,
            format!("expected at least {MIN_TOKEN} visible ASCII characters"),
        ));
    }
    Ok(Some((address, Token(token.0.into()))))
}
