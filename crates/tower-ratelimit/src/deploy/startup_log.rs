//! What `Limits::apply` logs once, at `info`: where the limits keep their
//! state, whose forwarding header they believe, and each limit in force.
//! Never a secret: a Redis password is masked, the key secret and the
//! admin token are not shown.

use super::inner::Inner;
use crate::access_list::AccessList;
use crate::key::ClientIp;
use ratelimit_redis::{StoreSettings, Target};

/// Logs the deployment `inner` applies.
pub(super) fn log(inner: &Inner) {
    store(&inner.deployment.store);
    proxies(inner.deployment.client_ip.as_ref());
    if let Some(file) = &inner.file {
        tracing::info!(file = %file.display(), "rate limits from the policy file (reloaded on SIGHUP and on change)");
    }
    let [allow, deny] = inner.table.lists();
    tracing::info!(allow = %allow.summary(), deny = %deny.summary(), "lists of every limit (allow: never limited; deny: 403)");
    for entry in inner.table.entries() {
        let routes: Vec<String> = entry.routes.iter().map(ToString::to_string).collect();
        let list = |entries: &[String]| match AccessList::parse(entries) {
            Ok(list) => list.summary(),
            Err(_) => "?".to_owned(),
        };
        tracing::info!(
            limit = %entry.name,
            algorithm = %entry.algorithm,
            key = %entry.key,
            plan = entry.plan.as_deref().unwrap_or("every request"),
            routes = %routes.join(", "),
            allow = %list(&entry.allow),
            deny = %list(&entry.deny),
            mode = ?entry.mode,
            overrides = entry.overrides.len(),
            "rate limit in force"
        );
    }
}

/// Where the limits keep their state.
fn store(settings: &StoreSettings) {
    let StoreSettings::Redis {
        url,
        tls_ca,
        fallback_max_keys,
        lease,
        key_secret,
        ..
    } = settings
    else {
        match settings {
            StoreSettings::Memory { max_keys: Some(max_keys) } => {
                tracing::info!(max_keys, "limits in memory (set REDIS_URL to share them)");
            }
            StoreSettings::Memory { max_keys: None } => tracing::info!(
                "limits in memory, no cap on their keys (set [store] max-keys or RATELIMIT_MAX_KEYS)"
            ),
            _ => {}
        }
        return;
    };
    // Checked at load; the Display masks a password.
    let redis =
        Target::parse(url, tls_ca.as_deref()).map_or_else(|_| "?".to_owned(), |t| t.to_string());
    match fallback_max_keys {
        Some(n) => {
            tracing::info!(%redis, fallback_max_keys = n, "limits in Redis, shared by every copy; in memory while Redis is away")
        }
        None => {
            tracing::info!(%redis, "limits in Redis, shared by every copy; no fallback: while Redis is away each limit's failure policy decides")
        }
    }
    let secret = if key_secret.is_some() {
        "the file's key secret"
    } else {
        "the key secret shared in Redis"
    };
    tracing::info!(
        "every copy names a key alike: long keys by their digest, secret keys with {secret}"
    );
    if let Some(size) = lease {
        tracing::warn!(size, "local leases on (RATELIMIT_LEASE): limits may be exceeded by copies * (size - 1) per window");
    }
}

/// Whose forwarding header `client-ip` believes.
fn proxies(client_ip: Option<&ClientIp>) {
    let Some(client_ip) = client_ip else {
        return tracing::info!(
            "no trusted proxies (TRUSTED_PROXIES, [proxies]): clients keyed by their TCP peer"
        );
    };
    let trusted: Vec<String> = client_ip
        .trusted()
        .iter()
        .map(ToString::to_string)
        .collect();
    tracing::info!(
        trusted_proxies = %trusted.join(","),
        header = ?client_ip.proxy_header(),
        "trusting this header from these proxies only"
    );
    crate::serve::warn_of_public_proxies(client_ip);
}
