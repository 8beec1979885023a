//! One `[[limit]]` entry (`LimitConfig`): its domain, descriptor entries, algorithm, ban, shadow and key header, read and checked.

use crate::config_error::{ConfigFileError, Source};
use crate::request_bounds::MAX_ENTRIES;
use ratelimit_core::plumbing::parse_duration;
use ratelimit_core::{AnyAlgorithm, BanPolicy};
use serde::Deserialize;
use std::collections::HashMap;

/// The headers that carry a client's address through proxies: a
/// `key-header` naming one is refused, since `GET /check` reads them only
/// from trusted proxies (`[proxies]`), and keys the address per client.
const FORWARDING_HEADERS: [&str; 3] = ["x-real-ip", "x-forwarded-for", "forwarded"];

/// Whether `name` can name a limit: 1 to 64 ASCII letters, digits, `-`
/// and `_` (it goes in header fields, metric labels and admin API paths).
fn is_limit_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// One `[[limit]]` entry, checked.
///
/// ```
/// use ratelimit_server::Config;
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
///     ban = "1h"
/// "#, "inline", |_| None).unwrap();
/// let limit = &config.limits[0];
/// assert_eq!((limit.name.as_str(), limit.domain.as_str()), ("per-ip", "edge"));
/// assert!(limit.algorithm.is_some() && !limit.shadow);
/// assert_eq!(limit.ban.unwrap().duration().as_secs(), 3600);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LimitConfig {
    /// Its name (`name`).
    pub name: String,
    /// The RLS domain it belongs to (`domain`).
    pub domain: String,
    /// The algorithm (`algorithm`); `None` for an unlimited entry.
    pub algorithm: Option<AnyAlgorithm>,
    /// The entries a descriptor must have, in order (`descriptors`).
    pub entries: Vec<EntryPattern>,
    /// Dry run: decisions computed and counted, never over the limit (`shadow`).
    pub shadow: bool,
    /// Once the limit refuses a key, the key is refused for this long
    /// (`ban = "1h"`); only on a limit whose key is one client's (an
    /// entry without a fixed value).
    pub ban: Option<BanPolicy>,
    /// The request header `GET /check` reads the key from (`key-header`);
    /// `None`: the client's address (see `[proxies]`).
    pub key_header: Option<http::HeaderName>,
    /// The plan whose members' requests it counts (`plan`, a
    /// `[[plan]]`'s name), or `"none"`: the requests in no plan; `None`:
    /// every request. A request of another plan passes it as if it did
    /// not match.
    pub plan: Option<String>,
}

/// One entry of a limit's `descriptors`: a key and, optionally, a fixed value.
///
/// ```
/// use ratelimit_server::Config;
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "login"
///     domain = "edge"
///     algorithm = "gcra 5/1m"
///     descriptors = [{ key = "path", value = "/login" }, { key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let [path, ip] = &config.limits[0].entries[..] else { panic!() };
/// assert_eq!((path.key.as_str(), path.value.as_deref()), ("path", Some("/login")));
/// assert_eq!((ip.key.as_str(), ip.value.as_deref()), ("remote_address", None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPattern {
    /// The entry's key.
    pub key: String,
    /// The value it must have; `None`: every value is a client of its own.
    pub value: Option<String>,
}

/// A `[[limit]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct LimitToml {
    name: String,
    domain: String,
    algorithm: Option<String>,
    descriptors: Vec<EntryToml>,
    #[serde(default)]
    shadow: bool,
    #[serde(default)]
    unlimited: bool,
    ban: Option<String>,
    key_header: Option<String>,
    plan: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryToml {
    key: String,
    value: Option<String>,
}

/// The `[[limit]]` entries, checked one by one and against each other,
/// with the line of each by name.
pub(crate) fn limit_configs(
    raw: Vec<toml::Spanned<LimitToml>>,
    source: &Source<'_>,
) -> Result<(Vec<LimitConfig>, HashMap<String, usize>), ConfigFileError> {
    let mut limits: Vec<LimitConfig> = Vec::with_capacity(raw.len());
    let mut lines = HashMap::new();
    for spanned in raw {
        let at = Some(spanned.span().start);
        lines.insert(
            spanned.get_ref().name.clone(),
            source.line_of(spanned.span().start),
        );
        let entry = spanned.into_inner();
        let name = entry.name.clone();
        let limit = limit_config(entry)
            .and_then(|limit| unclashing(&limits, limit))
            .map_err(|m| source.error(at, Some(&name), m))?;
        limits.push(limit);
    }
    Ok((limits, lines))
}

/// `limit` if no earlier limit has its name, or its domain, descriptors
/// and plan (limits of one descriptor and different plans each take
/// their plan's requests; one without a plan takes the others').
fn unclashing(limits: &[LimitConfig], limit: LimitConfig) -> Result<LimitConfig, String> {
    if limits.iter().any(|l| l.name == limit.name) {
        return Err("name given twice".into());
    }
    if let Some(other) = limits
        .iter()
        .find(|l| l.domain == limit.domain && l.entries == limit.entries && l.plan == limit.plan)
    {
        return Err(format!(
            "same domain, descriptors and plan as limit {:?}: a descriptor would match both",
            other.name
        ));
    }
    Ok(limit)
}

/// The algorithm of `algorithm` and `unlimited`: one of them.
fn algorithm(text: Option<String>, unlimited: bool) -> Result<Option<AnyAlgorithm>, String> {
    match (text, unlimited) {
        (Some(text), false) => text
            .parse::<AnyAlgorithm>()
            .map(Some)
            .map_err(|e| format!("algorithm = {text:?}: {e}")),
        (None, true) => Ok(None),
        (Some(text), true) => Err(format!(
            "algorithm = {text:?} and unlimited = true: give one of them"
        )),
        (None, false) => {
            Err("no algorithm: give one (like \"fixed-window 10/1m\") or unlimited = true".into())
        }
    }
}

/// The descriptor entries, each with a key and no empty value.
fn entries(raw: Vec<EntryToml>) -> Result<Vec<EntryPattern>, String> {
    if raw.is_empty() {
        return Err(
            "descriptors = []: give at least one entry, like { key = \"remote_address\" }".into(),
        );
    }
    if raw.len() > MAX_ENTRIES {
        return Err(format!(
            "descriptors has {} entries: at most {MAX_ENTRIES} (a request's descriptor may have no more)",
            raw.len()
        ));
    }
    let mut entries = Vec::with_capacity(raw.len());
    for e in raw {
        if e.key.is_empty() {
            return Err("a descriptors entry has key = \"\"".into());
        }
        if e.value.as_deref() == Some("") {
            return Err(format!(
                "descriptors entry {:?} has value = \"\": leave the value out to match every value",
                e.key
            ));
        }
        entries.push(EntryPattern {
            key: e.key,
            value: e.value,
        });
    }
    Ok(entries)
}

/// The ban of `ban = "1h"`, refused where it could hold clients other
/// than the one that earned it (a key every client shares) or could
/// never begin (no algorithm refuses).
fn ban(
    text: Option<String>,
    limited: bool,
    entries: &[EntryPattern],
) -> Result<Option<BanPolicy>, String> {
    let Some(text) = text else {
        return Ok(None);
    };
    if !limited {
        return Err(format!(
            "ban = {text:?} on an unlimited limit: it never refuses, so no ban begins"
        ));
    }
    if entries.iter().all(|e| e.value.is_some()) {
        return Err(format!(
            "ban = {text:?} on descriptors whose entries all have fixed values: their key is \
             shared by every client, so a ban one client earns would hold them all; give an \
             entry without a value (one client's, like {{ key = \"remote_address\" }})"
        ));
    }
    let duration = parse_duration(&text).map_err(|e| format!("ban = {text:?}: {e}"))?;
    BanPolicy::new(duration)
        .map(Some)
        .map_err(|e| format!("ban = {text:?}: {e}"))
}

/// The header of `key-header = "NAME"`: a header name, not a forwarding
/// header (those name the client through `[proxies]`).
fn key_header(header: String) -> Result<http::HeaderName, String> {
    let name = http::HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| format!("key-header = {header:?} is not a header name"))?;
    if FORWARDING_HEADERS.contains(&name.as_str()) {
        return Err(format!(
            "key-header = {header:?} carries the client's address through proxies: leave \
             key-header out (the key is then the client's address) and name the proxies and \
             their header in [proxies] (trusted = [...], header = {:?})",
            name.as_str()
        ));
    }
    Ok(name)
}

fn limit_config(raw: LimitToml) -> Result<LimitConfig, String> {
    if !is_limit_name(&raw.name) {
        return Err(format!(
            "name = {:?}: 1 to 64 letters, digits, - and _",
            raw.name
        ));
    }
    if raw.domain.is_empty() {
        return Err("domain = \"\": a domain names the RLS callers' domain".into());
    }
    let algorithm = algorithm(raw.algorithm, raw.unlimited)?;
    if raw.shadow && algorithm.is_none() {
        return Err("shadow = true on an unlimited limit: there is nothing to dry-run".into());
    }
    let entries = entries(raw.descriptors)?;
    let ban = ban(raw.ban, algorithm.is_some(), &entries)?;
    let key_header = raw.key_header.map(key_header).transpose()?;
    Ok(LimitConfig {
        name: raw.name,
        domain: raw.domain,
        algorithm,
        entries,
        shadow: raw.shadow,
        ban,
        key_header,
        plan: raw.plan,
    })
}
