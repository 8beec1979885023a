//! The table (`PolicyTable`): read from TOML and checked.

use super::entry::PolicyEntry;
use super::error::{entry_at, line_of, PolicyError};
use crate::access_list::AccessList;
use crate::policy::Mode;
use ratelimit_core::{AnyAlgorithm, MAX_OVERRIDES};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    /// Clients no limit limits (see [`PolicyEntry::allow`]).
    #[serde(default)]
    allow: Vec<String>,
    /// Clients every limit refuses on its routes.
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    limit: Vec<toml::Spanned<PolicyEntry>>,
}

/// Every limit of an app: see the [module docs](super) for the file.
#[derive(Debug, Clone)]
pub struct PolicyTable {
    pub(super) entries: Vec<PolicyEntry>,
    pub(super) allow: AccessList,
    pub(super) deny: AccessList,
}

impl PolicyTable {
    /// Reads a table from TOML text; `file` only names it in errors.
    pub fn from_toml(text: &str, file: Option<&Path>) -> Result<Self, PolicyError> {
        let error = |offset: Option<usize>, entry: Option<String>, message: String| PolicyError {
            file: file.map(Path::to_path_buf),
            line: offset.map(|o| line_of(text, o)),
            entry: entry.or_else(|| offset.and_then(|o| entry_at(text, o))),
            message,
        };
        let parsed: File = toml::from_str(text).map_err(|e| {
            let start = e.span().map(|s| s.start);
            error(start, None, e.message().trim().to_owned())
        })?;
        let mut entries: Vec<PolicyEntry> = Vec::with_capacity(parsed.limit.len());
        for spanned in parsed.limit {
            let at = Some(spanned.span().start);
            let mut entry = spanned.into_inner();
            let name = entry.name.clone();
            let fail = |message: String| error(at, Some(name.clone()), message);
            if !ratelimit_core::is_valid_limit_name(&entry.name) {
                return Err(fail(format!(
                    "a name is {}",
                    ratelimit_core::LIMIT_NAME_RULE
                )));
            }
            if entries.iter().any(|e| e.name == entry.name) {
                return Err(fail("the name is used twice".to_owned()));
            }
            if entry.mode == Mode::Shape && !matches!(entry.algorithm, AnyAlgorithm::LeakyBucket(_))
            {
                return Err(fail(
                    "mode \"shape\" needs a leaky-bucket algorithm".to_owned(),
                ));
            }
            if let Some(problem) = entry.disables_itself() {
                return Err(fail(problem));
            }
            entry.overrides = entry.canonical_overrides().map_err(fail)?;
            entry.checked_ban().map_err(fail)?;
            entry.checked_settle().map_err(fail)?;
            AccessList::parse(&entry.allow).map_err(fail)?;
            AccessList::parse(&entry.deny).map_err(fail)?;
            if entry.overrides.len() > MAX_OVERRIDES {
                return Err(fail(format!(
                    "{} overrides: at most {MAX_OVERRIDES}",
                    entry.overrides.len()
                )));
            }
            entries.push(entry);
        }
        if entries.len() > 64 {
            return Err(error(
                None,
                None,
                format!("{} limits: at most 64", entries.len()),
            ));
        }
        let allow = AccessList::parse(&parsed.allow).map_err(|e| error(None, None, e))?;
        let deny = AccessList::parse(&parsed.deny).map_err(|e| error(None, None, e))?;
        Ok(Self {
            entries,
            allow,
            deny,
        })
    }

    /// Reads a table from a TOML file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: Some(path.to_path_buf()),
            line: None,
            entry: None,
            message: format!("cannot read: {e}"),
        })?;
        Self::from_toml(&text, Some(path))
    }

    /// The entries, in the file's order.
    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// The entry named `name`.
    pub fn entry(&self, name: &str) -> Option<&PolicyEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}
