//! The deployment file's own sections (`[store]`, `[proxies]`, `[admin]`,
//! `[metrics]`; and `Limits`' `[server]`), split from the policy table's `[[limit]]`s with every
//! line kept in place, so both loaders' errors name the file's lines.

use crate::policy::PolicyError;
use ratelimit_redis::StoreSettings;
use serde::de::DeserializeOwned;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

/// The sections this module reads; the rest is the policy table's.
const SECTIONS: [&str; 4] = ["store", "proxies", "admin", "metrics"];

/// The section [`Limits`](super::Limits) reads besides (ratelimitd has a
/// `[server]` of its own).
pub(super) const SERVER: [&str; 1] = ["server"];

/// Every section `Limits` reads: the rest is the policy table's.
pub(super) const LIMITS_SECTIONS: [&str; 5] = ["store", "proxies", "admin", "metrics", "server"];

/// The deployment's sections as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Sections {
    #[serde(default, deserialize_with = "store")]
    pub(super) store: Option<StoreSettings>,
    #[serde(default)]
    pub(super) proxies: Option<Proxies>,
    #[serde(default)]
    pub(super) admin: Option<Admin>,
    #[serde(default)]
    pub(super) metrics: Option<Metrics>,
}

/// `Limits`' `[server]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerSection {
    #[serde(default)]
    pub(super) server: Option<Server>,
}

/// `[store]`: ratelimit-redis's `StoreSettings`, its `url` also written
/// as a list of a Cluster's node URLs.
fn store<'de, D: Deserializer<'de>>(d: D) -> Result<Option<StoreSettings>, D::Error> {
    let mut table = toml::Table::deserialize(d)?;
    if let Some(toml::Value::Array(nodes)) = table.get("url") {
        let nodes: Option<Vec<&str>> = nodes.iter().map(toml::Value::as_str).collect();
        let nodes =
            nodes.ok_or_else(|| D::Error::custom("url: expected a list of redis:// URLs"))?;
        let joined = toml::Value::String(nodes.join(","));
        table.insert("url".to_owned(), joined);
    }
    let store = toml::Value::Table(table)
        .try_into()
        .map_err(D::Error::custom)?;
    Ok(Some(store))
}

/// `[proxies]`: whose forwarding header `client-ip` believes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct Proxies {
    /// CIDRs or addresses of the trusted proxies.
    #[serde(default)]
    pub(super) trusted: Vec<String>,
    /// The header they write the client into.
    pub(super) header: Option<String>,
}

/// `[admin]`: where the admin API listens, and where its token is read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct Admin {
    pub(super) address: Option<String>,
    /// The variable holding the token (default `ADMIN_TOKEN`).
    pub(super) token_env: Option<String>,
    /// A file holding the token.
    pub(super) token_file: Option<PathBuf>,
    /// Refused: a token is never written in the file.
    token: Option<toml::Spanned<toml::Value>>,
}

/// `[metrics]`: where Prometheus scrapes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct Metrics {
    pub(super) address: Option<String>,
}

/// `[server]`: where [`Limits::serve`](super::Limits::serve) serves the
/// app, and its connection caps.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct Server {
    pub(super) addr: Option<String>,
    pub(super) max_connections: Option<u64>,
    pub(super) max_connections_per_client: Option<u64>,
}

/// A file's text split in two of the same lines: the policy table's
/// (the deployment's sections blanked) and the deployment's (the rest
/// blanked).
pub(super) fn split(text: &str) -> (String, String) {
    split_sections(text, &SECTIONS)
}

/// [`split`] on the sections `names`: the rest's lines, and theirs.
pub(super) fn split_sections(text: &str, names: &[&str]) -> (String, String) {
    let (mut table, mut own) = (String::new(), String::new());
    let mut mine = false;
    for line in text.split_inclusive('\n') {
        if let Some(name) = header(line) {
            mine = names.contains(&name);
        }
        let (keep, blank) = if mine {
            (&mut own, &mut table)
        } else {
            (&mut table, &mut own)
        };
        keep.push_str(line);
        if line.ends_with('\n') {
            blank.push('\n');
        }
    }
    (table, own)
}

/// The first name of a table header line (`[store]`, `[[limit]]`,
/// `[store.x]`), if `line` is one.
pub(super) fn header(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('[')?;
    let rest = rest.strip_prefix('[').unwrap_or(rest);
    let end = rest.find([']', '.'])?;
    Some(rest[..end].trim().trim_matches(['"', '\'']))
}

/// The sections of `own` (the deployment's lines of a file); an error
/// names the file, the line and the section.
pub(super) fn parse(own: &str, file: Option<&Path>) -> Result<Sections, PolicyError> {
    let sections: Sections = parse_as(own, file)?;
    if let Some(token) = sections.admin.as_ref().and_then(|a| a.token.as_ref()) {
        let message = "[admin] token: a token is never written in the file; \
                       give token-file, or token-env (default ADMIN_TOKEN)";
        return Err(error_at(own, file, Some(token.span().start), message));
    }
    Ok(sections)
}

/// `own` (some sections' lines of a file) read as a `T`; an error names
/// the file, the line and the section.
pub(super) fn parse_as<T: DeserializeOwned>(
    own: &str,
    file: Option<&Path>,
) -> Result<T, PolicyError> {
    toml::from_str(own).map_err(|e| {
        let start = e.span().map(|s| s.start);
        let section = start.and_then(|s| section_at(own, s));
        let message = e.message().trim();
        let message = section.map_or(message.to_owned(), |s| format!("[{s}] {message}"));
        error_at(own, file, start, &message)
    })
}

/// An error of `file` at byte `at` of `own`.
fn error_at(own: &str, file: Option<&Path>, at: Option<usize>, message: &str) -> PolicyError {
    PolicyError {
        file: file.map(Path::to_path_buf),
        line: at.map(|at| own[..at.min(own.len())].matches('\n').count() + 1),
        entry: None,
        message: message.to_owned(),
    }
}

/// The section holding byte `at` of `text` (or headed on its line).
fn section_at(text: &str, at: usize) -> Option<&str> {
    let end = text[at.min(text.len())..]
        .find('\n')
        .map_or(text.len(), |n| at + n);
    text[..end].split_inclusive('\n').rev().find_map(header)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_keeps_every_line_in_place() {
        let text = "allow = []\n[store]\nkind = \"memory\"\n[[limit]]\nname = \"a\"\n[admin]\naddress = \"x\"\n";
        let (table, own) = split(text);
        assert_eq!(table, "allow = []\n\n\n[[limit]]\nname = \"a\"\n\n\n");
        assert_eq!(
            own,
            "\n[store]\nkind = \"memory\"\n\n\n[admin]\naddress = \"x\"\n"
        );
    }
}
