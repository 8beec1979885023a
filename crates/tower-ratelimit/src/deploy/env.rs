//! The environment variables that override the file (the README's
//! settings table), and where each setting came from, for errors.

use super::error::DeployError;
use super::sections::header;
use crate::policy::PolicyError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The variables that override the file, as [`Limits::load`](super::Limits::load) reads them:
///
/// | variable | over |
/// |---|---|
/// | `TRUSTED_PROXIES`, `TRUSTED_PROXY_HEADER` | `[proxies] trusted`, `header` |
/// | `REDIS_URL`, `REDIS_TLS_CA` | `[store] url`, `tls-ca` (a URL over a memory store makes it Redis) |
/// | `RATELIMIT_MAX_KEYS` | `[store] max-keys`, `fallback-max-keys` (default 1,000,000 in memory) |
/// | `RATELIMIT_LEASE` | `[store] lease` |
/// | `ADMIN_ADDR`, `ADMIN_TOKEN` | `[admin] address`, `token-env`, `token-file` |
/// | `METRICS_ADDR` | `[metrics] address` |
/// | `RATELIMIT_CONFIG` | the path given to `Limits::load` |
/// | `BIND_ADDR`, `MAX_CONNECTIONS`, `MAX_CONNECTIONS_PER_CLIENT` | `[server] addr`, `max-connections`, `max-connections-per-client` |
///
/// ```
/// assert!(tower_ratelimit::deploy::OVERRIDES.contains(&"REDIS_URL"));
/// ```
pub const OVERRIDES: [&str; 13] = [
    "TRUSTED_PROXIES",
    "TRUSTED_PROXY_HEADER",
    "REDIS_URL",
    "REDIS_TLS_CA",
    "RATELIMIT_MAX_KEYS",
    "RATELIMIT_LEASE",
    "ADMIN_ADDR",
    "ADMIN_TOKEN",
    "METRICS_ADDR",
    "RATELIMIT_CONFIG",
    "BIND_ADDR",
    "MAX_CONNECTIONS",
    "MAX_CONNECTIONS_PER_CLIENT",
];

/// The environment, as a lookup (the process's, or a test's).
pub(super) struct Env<'a> {
    var: &'a dyn Fn(&str) -> Option<String>,
    pub(super) file: Option<PathBuf>,
    /// The deployment's lines of the file, for the line of a field.
    own: &'a str,
}

impl<'a> Env<'a> {
    pub(super) fn new(
        var: &'a dyn Fn(&str) -> Option<String>,
        file: Option<&Path>,
        own: &'a str,
    ) -> Self {
        Self {
            var,
            file: file.map(Path::to_path_buf),
            own,
        }
    }

    /// `var`'s value, trimmed; `None` when unset or blank.
    pub(super) fn get(&self, var: &str) -> Option<String> {
        (self.var)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// `var`'s setting, if it is set.
    pub(super) fn setting(&self, var: &'static str) -> Option<Setting> {
        self.or_file(var, "", None)
    }

    /// `var` as the setting of `field` when set, else the file's value.
    pub(super) fn or_file(
        &self,
        var: &'static str,
        field: &'static str,
        file: Option<String>,
    ) -> Option<Setting> {
        match self.get(var) {
            Some(text) => Some(Setting {
                text,
                origin: Origin::Env(var),
            }),
            None => file.map(|text| Setting {
                text,
                origin: Origin::File(field),
            }),
        }
    }

    /// An address from `var`, or else the file's `field`.
    pub(super) fn address(
        &self,
        var: &'static str,
        field: &'static str,
        file: Option<String>,
    ) -> Result<Option<SocketAddr>, DeployError> {
        self.or_file(var, field, file)
            .map(|s| s.parse(self))
            .transpose()
    }

    /// The error of a setting from `origin`: naming the variable, or the
    /// file and the field.
    pub(super) fn error(&self, origin: Origin, message: impl std::fmt::Display) -> DeployError {
        match origin {
            Origin::Env(var) => DeployError::env(var, message),
            Origin::File(field) => DeployError::File(PolicyError {
                file: self.file.clone(),
                line: field_line(self.own, field),
                entry: None,
                message: format!("{field}: {message}"),
            }),
        }
    }
}

/// Where a setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// An environment variable.
    Env(&'static str),
    /// A field of the file (`[admin] address`).
    File(&'static str),
}

/// A setting's text and where it came from.
#[derive(Debug, Clone)]
pub(super) struct Setting {
    pub(super) text: String,
    pub(super) origin: Origin,
}

impl Setting {
    /// The text parsed as a `T`, or the error naming where it came from.
    pub(super) fn parse<T: std::str::FromStr>(&self, env: &Env<'_>) -> Result<T, DeployError>
    where
        T::Err: std::fmt::Display,
    {
        self.text
            .parse()
            .map_err(|e| env.error(self.origin, format!("{:?}: {e}", self.text)))
    }
}

/// The line (1-based) of `field` (`[admin] address`) in `text`: the
/// line giving it, else its section's header; `None` when neither is
/// there (a default).
fn field_line(text: &str, field: &str) -> Option<usize> {
    let (section, key) = field.split_once(' ')?;
    let section = section.trim_matches(['[', ']']);
    let mut inside = false;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = header(line) {
            inside = name == section;
            if inside {
                header_line = Some(i + 1);
            }
            continue;
        }
        let gives = line
            .trim_start()
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if inside && gives {
            return Some(i + 1);
        }
    }
    header_line
}

#[cfg(test)]
mod tests {
    use super::field_line;

    #[test]
    fn a_field_is_found_on_its_line_in_its_section() {
        let text = "\n[metrics]\naddress = \"x\"\n[admin]\naddress-x = 1\naddress = \"y\"\n";
        assert_eq!(field_line(text, "[metrics] address"), Some(3));
        assert_eq!(field_line(text, "[admin] address"), Some(6));
        assert_eq!(field_line(text, "[admin] token-file"), Some(4));
        assert_eq!(field_line(text, "[store] url"), None);
    }
}
