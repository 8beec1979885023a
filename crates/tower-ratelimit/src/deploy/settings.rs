//! A deployment's settings (`Deployment`): the file's sections with the
//! environment's overrides, each checked.

use super::admin_token::AdminToken;
use super::env::{Env, Origin, Setting};
use super::error::DeployError;
use super::sections::{self, Sections};
use crate::key::{ClientIp, ProxyHeader};
use ratelimit_redis::{RedisEntries, StoreSettings, Target, DEFAULT_PREFIX, DEFAULT_REFRESH};
use std::net::SocketAddr;
use std::path::Path;

/// The most keys a memory store (or a Redis fallback) may be given.
const MAX_KEYS: usize = 1_000_000_000;

/// A memory store's cap when neither `[store] max-keys` nor
/// `RATELIMIT_MAX_KEYS` gives one (the README's default).
const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// Everything a deployment runs with but its limits: the file's
/// `[store]`, `[proxies]`, `[admin]` and `[metrics]` with the
/// environment's overrides ([`OVERRIDES`](super::OVERRIDES)), each
/// checked. [`Limits`](super::Limits) reads it; a service with limits of
/// its own (ratelimitd's descriptor limits) reads it with
/// [`split`](Self::split) and the rest of the file itself.
///
/// ```
/// use tower_ratelimit::deploy::Deployment;
///
/// let text = "[proxies]\ntrusted = [\"10.0.0.0/8\"]\n\n[server]\nport = 80\n";
/// let env = |var: &str| (var == "METRICS_ADDR").then(|| "127.0.0.1:9100".to_owned());
/// let (deployment, rest) = Deployment::split(text, None, env)?;
/// assert!(deployment.client_ip.is_some());
/// assert_eq!(deployment.metrics.unwrap().port(), 9100);
/// assert!(deployment.admin.is_none());
/// // The rest keeps every line in place: its own errors name the same lines.
/// assert_eq!(rest, "\n\n\n[server]\nport = 80\n");
/// # Ok::<(), tower_ratelimit::deploy::DeployError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Deployment {
    /// `[store]` (with `REDIS_URL`, `REDIS_TLS_CA`, `RATELIMIT_MAX_KEYS`,
    /// `RATELIMIT_LEASE`): where limits keep their state; memory of at
    /// most 1,000,000 keys by default.
    pub store: StoreSettings,
    /// `[proxies]` (with `TRUSTED_PROXIES`, `TRUSTED_PROXY_HEADER`): whose
    /// forwarding header names the client; `None` when no proxy is trusted.
    pub client_ip: Option<ClientIp>,
    /// `[admin]` (with `ADMIN_ADDR`, `ADMIN_TOKEN`): the admin API's
    /// address and token; `None`: off.
    pub admin: Option<AdminSettings>,
    /// `[metrics] address` (or `METRICS_ADDR`): where Prometheus scrapes;
    /// `None`: off.
    pub metrics: Option<SocketAddr>,
}

/// Where the admin API listens, and its token.
///
/// ```
/// use tower_ratelimit::deploy::Deployment;
///
/// let env = |var: &str| match var {
///     "ADMIN_ADDR" => Some("127.0.0.1:9200".to_owned()),
///     "ADMIN_TOKEN" => Some("0123456789abcdef".to_owned()),
///     _ => None,
/// };
/// let (deployment, _) = Deployment::split("", None, env)?;
/// let admin = deployment.admin.unwrap();
/// assert_eq!(admin.address.port(), 9200);
/// assert!(admin.token.matches("0123456789abcdef"));
/// # Ok::<(), tower_ratelimit::deploy::DeployError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminSettings {
    /// Where it listens (`[admin] address`, `ADMIN_ADDR`).
    pub address: SocketAddr,
    /// Its bearer token (`ADMIN_TOKEN`, `[admin] token-env` or `token-file`).
    pub token: AdminToken,
}

impl Deployment {
    /// Where the run-time entries (list entries, overrides, keys moved
    /// between plans) are shared with every instance: on the store's
    /// Redis, under its prefix, hashed with its key secret; `None` for a
    /// memory store. What [`Limits::apply`](super::Limits::apply) shares
    /// through, and a service's own plans with it (ratelimitd's), so that
    /// both read one hash. Connects in the background: needs a tokio
    /// runtime.
    ///
    /// ```
    /// use tower_ratelimit::deploy::Deployment;
    ///
    /// let (memory, _) = Deployment::split("", None, |_| None)?;
    /// assert!(memory.shared_entries().unwrap().is_none());
    /// # Ok::<(), tower_ratelimit::deploy::DeployError>(())
    /// ```
    pub fn shared_entries(&self) -> Result<Option<RedisEntries>, String> {
        let StoreSettings::Redis {
            url,
            tls_ca,
            prefix,
            key_secret,
            ..
        } = &self.store
        else {
            return Ok(None);
        };
        let target = Target::parse(url, tls_ca.as_deref()).map_err(|e| format!("[store] {e}"))?;
        let prefix = prefix.as_deref().unwrap_or(DEFAULT_PREFIX).to_owned();
        let entries = match key_secret {
            Some(secret) => {
                RedisEntries::with_key_secret(target, prefix, DEFAULT_REFRESH, secret.0)
            }
            None => RedisEntries::new(target, prefix),
        };
        entries.map(Some).map_err(|e| format!("[store] {e}"))
    }

    /// The deployment's sections of a file's `text`, with `var` looking
    /// up the environment's overrides, and the rest of the text: every
    /// line in place, the deployment's blank, for the caller's own
    /// loader. Errors name `file`, the line and the section, or the
    /// variable.
    pub fn split(
        text: &str,
        file: Option<&Path>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Self, String), DeployError> {
        let (rest, own) = sections::split(text);
        let sections = sections::parse(&own, file)?;
        let deployment = Self::resolve(sections, &Env::new(&var, file, &own))?;
        Ok((deployment, rest))
    }

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
        Ok(Self {
            store: store(sections.store.unwrap_or_default(), env)?,
            client_ip: proxies(sections.proxies, env)?,
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
        // The memory store's cap, its default too, becomes the fallback's.
        let cap = match &store {
            StoreSettings::Memory { max_keys } => Some(max_keys.unwrap_or(DEFAULT_MAX_KEYS)),
            _ => None,
        };
        match &mut store {
            StoreSettings::Redis { url: file_url, .. } => *file_url = url,
            _ => store = redis_over_memory(url, cap),
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
            check_target(url, tls_ca.as_deref(), url_origin, env)?;
        }
        StoreSettings::Memory { max_keys: file_max } => {
            if tls.is_some() {
                return Err(redis_only("REDIS_TLS_CA"));
            }
            if lease.is_some() {
                return Err(redis_only("RATELIMIT_LEASE"));
            }
            *file_max = memory_max_keys(*file_max, max_keys, env)?;
        }
        _ => {}
    }
    Ok(store)
}

/// Refuses a Redis `url` (with the CA file `tls_ca`) that names no
/// server, naming where the bad value came from.
fn check_target(
    url: &str,
    tls_ca: Option<&std::path::Path>,
    url_origin: Origin,
    env: &Env<'_>,
) -> Result<(), DeployError> {
    let Err(e) = Target::parse(url, tls_ca) else {
        return Ok(());
    };
    let origin = match e {
        ratelimit_redis::RedisBuildError::TlsCa(_) if env.get("REDIS_TLS_CA").is_some() => {
            Origin::Env("REDIS_TLS_CA")
        }
        ratelimit_redis::RedisBuildError::TlsCa(_) => Origin::File("[store] tls-ca"),
        _ => url_origin,
    };
    Err(env.error(origin, e))
}

/// Redis at `url` in place of a memory store of at most `cap` keys: the
/// cap becomes the fallback's, so that while Redis fails each instance
/// decides in memory as it did before.
fn redis_over_memory(url: String, cap: Option<usize>) -> StoreSettings {
    let mut store = StoreSettings::redis(url);
    if let StoreSettings::Redis {
        fallback_max_keys, ..
    } = &mut store
    {
        *fallback_max_keys = cap;
    }
    store
}

/// A memory store's cap: `RATELIMIT_MAX_KEYS` (`env_max`) over the
/// file's `max-keys`, which may not be 0, else [`DEFAULT_MAX_KEYS`].
fn memory_max_keys(
    file_max: Option<usize>,
    env_max: Option<usize>,
    env: &Env<'_>,
) -> Result<Option<usize>, DeployError> {
    match env_max.or(file_max) {
        Some(0) => {
            let error = format!("0: expected 1 to {MAX_KEYS}");
            Err(env.error(Origin::File("[store] max-keys"), error))
        }
        Some(cap) => Ok(Some(cap)),
        None => Ok(Some(DEFAULT_MAX_KEYS)),
    }
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
    let client_ip = trusted
        .text
        .parse::<ClientIp>()
        .map_err(|e| env.error(trusted.origin, e))?;
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
) -> Result<Option<AdminSettings>, DeployError> {
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
                "the admin API is on (ADMIN_ADDR, [admin] address) without a token: \
                 set ADMIN_TOKEN, or [admin] token-env or token-file",
            ))
        }
    };
    let token = AdminToken::new(&token.0).map_err(|e| env.error(token.1, e))?;
    Ok(Some(AdminSettings { address, token }))
}
