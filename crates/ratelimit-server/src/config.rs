//! The configuration file (`Config`): ratelimitd's `[server]` and descriptor `[[limit]]`s, with tower-ratelimit's deployment sections (`[store]`, `[proxies]`, `[admin]`, `[metrics]`), read and checked.

use crate::config_error::{ConfigFileError, Source};
use crate::limit_config::{limit_configs, LimitConfig, LimitToml};
use ratelimit_redis::StoreSettings;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use tower_ratelimit::deploy::Deployment;
use tower_ratelimit::policy::{PlanDirectory, PlanList, PolicyError, NO_PLAN};

/// The default HTTP address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:8080";
/// The default gRPC address.
pub const DEFAULT_GRPC: &str = "127.0.0.1:8081";
/// The cap on keys per limit of a memory store whose `max-keys` is not given.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// A checked configuration: the server's settings, the deployment's and
/// the limits, the environment's variables over the file.
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
/// "#, "inline", |_| None).unwrap();
/// assert_eq!(config.limits[0].name, "per-ip");
/// assert_eq!(config.server.http.port(), 8080);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (or the origin given to [`Config::parse`]).
    pub file: String,
    /// The `[server]` table (with `BIND_ADDR`, `GRPC_BIND_ADDR`).
    pub server: ServerSettings,
    /// `[store]`, `[proxies]`, `[admin]` and `[metrics]`, as
    /// tower-ratelimit's deployment file has them (with the variables of
    /// its [`OVERRIDES`](tower_ratelimit::deploy::OVERRIDES)). A memory
    /// store is capped at [`DEFAULT_MAX_KEYS`] keys per limit unless
    /// `max-keys` says otherwise.
    pub deployment: Deployment,
    /// The `[[limit]]` entries, in file order.
    pub limits: Vec<LimitConfig>,
    /// The `[[plan]]`s, tower-ratelimit's (read by its parser, with its
    /// checks), each keyed on descriptor entries (`key =
    /// "descriptor:NAME"`), their `keys-file` and `keys-env` read.
    pub plans: PlanList,
    /// The line of each `[[limit]]`, by name, for errors found later.
    lines: HashMap<String, usize>,
}

/// The `[server]` table.
///
/// ```
/// use ratelimit_server::{Config, DEFAULT_HTTP};
///
/// let config = Config::parse("[server]\nrefuse-status = 403", "inline", |_| None).unwrap();
/// assert_eq!(config.server.refuse_status, 403);
/// assert_eq!(config.server.http.to_string(), DEFAULT_HTTP);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Where the gRPC service listens (`grpc`, or `GRPC_BIND_ADDR`).
    pub grpc: SocketAddr,
    /// Where the HTTP API listens (`http`, or `BIND_ADDR`).
    pub http: SocketAddr,
    /// Whether answers carry `RateLimit-Policy`, `RateLimit` and `Retry-After` (`headers`).
    pub headers: bool,
    /// The status `GET /check` refuses with: 429 (the default) or 403 (`refuse-status`).
    pub refuse_status: u16,
}

/// How serde names the sections [`FileToml`] takes, in an error.
const OWN_SECTIONS: &str = "expected one of `server`, `limit`, `plan`";
/// Every section the file may have, for an error about one it may not.
const ALL_SECTIONS: &str =
    "expected [server], [[limit]], [[plan]], [store], [proxies], [admin] or [metrics]";

/// The file's own sections as written (the deployment's lines blank).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    server: ServerToml,
    #[serde(default, rename = "limit")]
    limits: Vec<toml::Spanned<LimitToml>>,
    /// Read by tower-ratelimit's [`PlanList`]; here for their lines.
    #[serde(default, rename = "plan")]
    plans: Vec<toml::Spanned<toml::Table>>,
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

impl Config {
    /// Reads and checks the file at `path`, with the process's
    /// environment over it.
    pub fn load(path: &Path) -> Result<Self, ConfigFileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigFileError {
            file: file.clone(),
            line: None,
            limit: None,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, &file, |v| std::env::var(v).ok())
    }

    /// Checks the TOML `text`, with `var` looking up the environment's
    /// variables (`|_| None`: none); errors name `origin` as the file,
    /// and the line when known, or the variable.
    pub fn parse(
        text: &str,
        origin: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigFileError> {
        let (mut deployment, rest) = Deployment::split(text, Some(Path::new(origin)), &var)
            .map_err(|e| ConfigFileError::of_deployment(origin, e))?;
        let source = Source {
            text: &rest,
            origin,
        };
        let raw: FileToml = toml::from_str(&rest).map_err(|e| {
            // The file's own sections are only some of those it may have.
            let message = e.message().trim().replace(OWN_SECTIONS, ALL_SECTIONS);
            source.error(e.span().map(|s| s.start), None, message)
        })?;
        let file_error = |m| source.error(None, None, m);
        let mut server = server_settings(raw.server).map_err(file_error)?;
        crate::env::server_env(&mut server.http, &mut server.grpc, &var).map_err(file_error)?;
        let (limits, lines) = limit_configs(raw.limits, &source)?;
        let plans = plan_list(&rest, origin, &var)?;
        let in_memory = matches!(deployment.store, StoreSettings::Memory { .. });
        if let Some((at, plan)) = raw
            .plans
            .iter()
            .zip(plans.plans())
            .find(|(_, p)| p.shared && in_memory)
        {
            return Err(source.error(
                Some(at.span().start),
                None,
                format!(
                    "plan {:?}: shared = true needs the store in Redis ([store] kind = \"redis\", \
                     or REDIS_URL), where the keys moved between plans are shared",
                    plan.name
                ),
            ));
        }
        if let StoreSettings::Memory { max_keys } = &mut deployment.store {
            max_keys.get_or_insert(DEFAULT_MAX_KEYS);
        }
        let config = Self {
            file: origin.to_owned(),
            server,
            deployment,
            limits,
            plans,
            lines,
        };
        config.limit_plans()?;
        Ok(config)
    }

    /// Refuses a limit's `plan` that names no `[[plan]]` (`"none"` needs
    /// one too), naming the limit and its line.
    fn limit_plans(&self) -> Result<(), ConfigFileError> {
        let names: Vec<&str> = self.plans.plans().iter().map(|p| p.name.as_str()).collect();
        for limit in &self.limits {
            let Some(plan) = &limit.plan else { continue };
            let known = names.contains(&plan.as_str()) || (plan == NO_PLAN && !names.is_empty());
            if !known {
                return Err(self.limit_error(
                    &limit.name,
                    format!(
                        "unknown plan {plan:?}: the [[plan]]s are {names:?}, and \"{NO_PLAN}\" \
                         (requests in no plan) needs one"
                    ),
                ));
            }
        }
        Ok(())
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

/// The `[[plan]]`s of `text` (the file `origin`), read and checked by
/// tower-ratelimit, their members read once here to refuse what the
/// server cannot run (a key other than `descriptor:NAME`, `keys-app`, a
/// key listed twice), naming the file, the line and the plan.
fn plan_list(
    text: &str,
    origin: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<PlanList, ConfigFileError> {
    let of_policy = |e: PolicyError| ConfigFileError {
        // A keys file's own line, or the plan's in this file.
        file: e
            .file
            .map_or_else(|| origin.to_owned(), |f| f.display().to_string()),
        line: e.line,
        limit: None,
        message: e.message,
    };
    let plans = PlanList::from_toml(text, Some(Path::new(origin)), var).map_err(of_policy)?;
    PlanDirectory::of_descriptors(&plans).map_err(of_policy)?;
    Ok(plans)
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
