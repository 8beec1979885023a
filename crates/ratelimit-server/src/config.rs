//! The configuration file: `[server]`, `[store]`, `[metrics]` and `[admin]` settings and `[[limit]]` entries, read and checked.

use crate::address::optional_address;
use crate::admin_settings::{AdminSettings, AdminToml};
use ratelimit_core::plumbing::{is_valid_limit_name, LIMIT_NAME_RULE};
use ratelimit_core::AnyAlgorithm;
use ratelimit_redis::StoreSettings;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

/// The default HTTP address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:8080";
/// The default gRPC address.
pub const DEFAULT_GRPC: &str = "127.0.0.1:8081";
/// The cap on keys per limit of a memory store whose `max-keys` is not given.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;
/// The default request header that `GET /check` reads a key from.
pub const DEFAULT_KEY_HEADER: &str = "x-real-ip";

/// A checked configuration: the server's settings and its limits.
///
/// ```
/// use ratelimit_server::Config;
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 10/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline").unwrap();
/// assert_eq!(config.limits[0].name, "per-ip");
/// assert_eq!(config.server.http.port(), 8080);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (or the origin given to [`Config::parse`]).
    pub file: String,
    /// The `[server]` table.
    pub server: ServerSettings,
    /// The `[store]` table: where limits keep their state (memory by
    /// default, capped at [`DEFAULT_MAX_KEYS`] keys per limit unless
    /// `max-keys` says otherwise; or Redis, shared by every instance).
    pub store: StoreSettings,
    /// The `[[limit]]` entries, in file order.
    pub limits: Vec<LimitConfig>,
    /// The `[metrics]` table.
    pub metrics: MetricsSettings,
    /// The `[admin]` table.
    pub admin: AdminSettings,
    /// The line of each `[[limit]]`, by name, for errors found later.
    lines: std::collections::HashMap<String, usize>,
}

/// The `[metrics]` table: where Prometheus scrapes `GET /metrics`.
///
/// ```
/// use ratelimit_server::Config;
///
/// let config = Config::parse("[metrics]\naddr = \"127.0.0.1:9090\"", "inline").unwrap();
/// assert_eq!(config.metrics.addr.unwrap().port(), 9090);
/// assert!(Config::parse("", "inline").unwrap().metrics.addr.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// The metrics listener's address (`addr`, or `METRICS_ADDR`); `None`: no metrics.
    pub addr: Option<SocketAddr>,
}

/// The `[server]` table.
///
/// ```
/// use ratelimit_server::{Config, DEFAULT_HTTP};
///
/// let config = Config::parse("[server]\nrefuse-status = 403", "inline").unwrap();
/// assert_eq!(config.server.refuse_status, 403);
/// assert_eq!(config.server.http.to_string(), DEFAULT_HTTP);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Where the gRPC service listens (`grpc`).
    pub grpc: SocketAddr,
    /// Where the HTTP API listens (`http`).
    pub http: SocketAddr,
    /// Whether answers carry `RateLimit-Policy`, `RateLimit` and `Retry-After` (`headers`).
    pub headers: bool,
    /// The status `GET /check` refuses with: 429 (the default) or 403 (`refuse-status`).
    pub refuse_status: u16,
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
/// "#, "inline").unwrap();
/// let limit = &config.limits[0];
/// assert_eq!((limit.name.as_str(), limit.domain.as_str()), ("per-ip", "edge"));
/// assert!(limit.algorithm.is_some() && !limit.shadow);
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
    /// The request header `GET /check` reads the key from (`key-header`).
    pub key_header: http::HeaderName,
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
/// "#, "inline").unwrap();
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

/// Why a configuration was refused: the file, the line, the limit and what is wrong.
///
/// ```
/// use ratelimit_server::Config;
///
/// let err = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "gcra 5/soon"
///     descriptors = [{ key = "remote_address" }]
/// "#, "limits.toml").unwrap_err();
/// assert_eq!((err.file.as_str(), err.limit.as_deref()), ("limits.toml", Some("per-ip")));
/// assert!(err.to_string().contains("soon"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    /// The file (or the origin given to [`Config::parse`]).
    pub file: String,
    /// The line (1-based) of the fault or of its `[[limit]]`, when known.
    pub line: Option<usize>,
    /// The limit at fault, if one is.
    pub limit: Option<String>,
    /// What is wrong, naming the bad value.
    pub message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if let Some(limit) = &self.limit {
            write!(f, "limit {limit:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigFileError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    server: ServerToml,
    store: Option<StoreSettings>,
    #[serde(default, rename = "limit")]
    limits: Vec<toml::Spanned<LimitToml>>,
    #[serde(default)]
    metrics: MetricsToml,
    #[serde(default)]
    admin: AdminToml,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MetricsToml {
    addr: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServerToml {
    grpc: Option<String>,
    http: Option<String>,
    #[serde(default)]
    headers: bool,
    refuse_status: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LimitToml {
    name: String,
    domain: String,
    algorithm: Option<String>,
    descriptors: Vec<EntryToml>,
    #[serde(default)]
    shadow: bool,
    #[serde(default)]
    unlimited: bool,
    key_header: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryToml {
    key: String,
    value: Option<String>,
}

impl Config {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigFileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigFileError {
            file: file.clone(),
            line: None,
            limit: None,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, &file)
    }

    /// Checks the TOML `text`; errors name `origin` as the file, and the
    /// line when known.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigFileError> {
        let source = Source { text, origin };
        let raw: FileToml = toml::from_str(text).map_err(|e| {
            source.error(
                e.span().map(|s| s.start),
                None,
                e.message().trim().to_owned(),
            )
        })?;
        let file_error = |m| source.error(None, None, m);
        let server = server_settings(raw.server).map_err(file_error)?;
        let (limits, lines) = limit_configs(raw.limits, &source)?;
        let store = store_settings(raw.store).map_err(file_error)?;
        let metrics = MetricsSettings {
            addr: optional_address(raw.metrics.addr, "[metrics] addr").map_err(file_error)?,
        };
        let admin = raw.admin.checked().map_err(file_error)?;
        Ok(Self {
            file: origin.to_owned(),
            server,
            store,
            limits,
            metrics,
            admin,
            lines,
        })
    }

    /// An error about the limit `name`, at its line.
    pub(crate) fn limit_error(&self, name: &str, message: String) -> ConfigFileError {
        ConfigFileError {
            file: self.file.clone(),
            line: self.lines.get(name).copied(),
            limit: Some(name.to_owned()),
            message,
        }
    }
}

/// The text being parsed and the file it came from, for errors.
struct Source<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Source<'_> {
    /// The line of byte offset `at`, from 1.
    fn line_of(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())].matches('\n').count() + 1
    }

    /// An error at byte offset `at` (if known) about `limit` (if any).
    fn error(&self, at: Option<usize>, limit: Option<&str>, message: String) -> ConfigFileError {
        ConfigFileError {
            file: self.origin.to_owned(),
            line: at.map(|at| self.line_of(at)),
            limit: limit.map(str::to_owned),
            message,
        }
    }
}

/// The `[[limit]]` entries, checked one by one and against each other,
/// with the line of each by name.
fn limit_configs(
    raw: Vec<toml::Spanned<LimitToml>>,
    source: &Source<'_>,
) -> Result<(Vec<LimitConfig>, std::collections::HashMap<String, usize>), ConfigFileError> {
    let mut limits: Vec<LimitConfig> = Vec::with_capacity(raw.len());
    let mut lines = std::collections::HashMap::new();
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

/// `limit` if no earlier limit has its name, or its domain and
/// descriptors.
fn unclashing(limits: &[LimitConfig], limit: LimitConfig) -> Result<LimitConfig, String> {
    if limits.iter().any(|l| l.name == limit.name) {
        return Err("name given twice".into());
    }
    if let Some(other) = limits
        .iter()
        .find(|l| l.domain == limit.domain && l.entries == limit.entries)
    {
        return Err(format!(
            "same domain and descriptors as limit {:?}: a descriptor would match both",
            other.name
        ));
    }
    Ok(limit)
}

/// The `[store]` table: memory capped at [`DEFAULT_MAX_KEYS`] keys if it
/// is absent or gives no `max-keys`.
fn store_settings(raw: Option<StoreSettings>) -> Result<StoreSettings, String> {
    match raw {
        None | Some(StoreSettings::Memory { max_keys: None }) => Ok(StoreSettings::Memory {
            max_keys: Some(DEFAULT_MAX_KEYS),
        }),
        Some(StoreSettings::Memory { max_keys: Some(0) }) => {
            Err("[store] max-keys = 0: expected at least 1".into())
        }
        Some(store) => Ok(store),
    }
}

fn address(value: Option<String>, default: &str, what: &str) -> Result<SocketAddr, String> {
    let text = value.as_deref().unwrap_or(default);
    text.parse()
        .map_err(|_| format!("[server] {what} = {text:?} is not an address like {default}"))
}

fn server_settings(raw: ServerToml) -> Result<ServerSettings, String> {
    let refuse_status = raw.refuse_status.unwrap_or(429);
    if refuse_status != 429 && refuse_status != 403 {
        return Err(format!(
            "[server] refuse-status = {refuse_status}: expected 429 or 403"
        ));
    }
    Ok(ServerSettings {
        grpc: address(raw.grpc, DEFAULT_GRPC, "grpc")?,
        http: address(raw.http, DEFAULT_HTTP, "http")?,
        headers: raw.headers,
        refuse_status,
    })
}

fn limit_config(raw: LimitToml) -> Result<LimitConfig, String> {
    if !is_valid_limit_name(&raw.name) {
        return Err(format!("bad name: {LIMIT_NAME_RULE}"));
    }
    if raw.domain.is_empty() {
        return Err("domain = \"\": a domain names the RLS callers' domain".into());
    }
    let algorithm = match (raw.algorithm, raw.unlimited) {
        (Some(text), false) => Some(
            text.parse::<AnyAlgorithm>()
                .map_err(|e| format!("algorithm = {text:?}: {e}"))?,
        ),
        (None, true) => None,
        (Some(text), true) => {
            return Err(format!(
                "algorithm = {text:?} and unlimited = true: give one of them"
            ))
        }
        (None, false) => {
            return Err(
                "no algorithm: give one (like \"fixed-window 10/1m\") or unlimited = true".into(),
            )
        }
    };
    if raw.shadow && algorithm.is_none() {
        return Err("shadow = true on an unlimited limit: there is nothing to dry-run".into());
    }
    if raw.descriptors.is_empty() {
        return Err(
            "descriptors = []: give at least one entry, like { key = \"remote_address\" }".into(),
        );
    }
    let mut entries = Vec::with_capacity(raw.descriptors.len());
    for e in raw.descriptors {
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
    let header = raw.key_header.as_deref().unwrap_or(DEFAULT_KEY_HEADER);
    let key_header = http::HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| format!("key-header = {header:?} is not a header name"))?;
    Ok(LimitConfig {
        name: raw.name,
        domain: raw.domain,
        algorithm,
        entries,
        shadow: raw.shadow,
        key_header,
    })
}
