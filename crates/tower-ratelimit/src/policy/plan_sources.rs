//! Where a plan's members are listed (`Listed`): a keys file and an
//! environment variable, read with the table (at load and at each reload,
//! all or nothing), and the app's list, read at apply and at each reload.
//! The keys are kept as written here; they are never shown.

use super::plan::Plan;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The members of a plan with `keys-app = "NAME"`, the app's list of
/// `NAME` in [`PolicyOptions::plan_keys`](super::PolicyOptions::plan_keys):
/// keys as a limit's key writes them (an API key, an address), called at
/// apply and at each reload.
///
/// ```
/// use std::sync::Arc;
/// use tower_ratelimit::policy::{PlanKeys, PolicyOptions};
///
/// // `keys-app = "enterprise"`: the keys of the app's enterprise customers.
/// let enterprise: PlanKeys = Arc::new(|| vec!["ent-key-1".to_owned(), "ent-key-2".to_owned()]);
/// let mut options = PolicyOptions::default();
/// options.plan_keys.insert("enterprise".into(), enterprise);
/// ```
pub type PlanKeys = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// The most keys all plans of a table list together.
pub const MAX_PLAN_KEYS: usize = 1_000_000;

/// The longest key written in a list.
const MAX_KEY_LEN: usize = 4096;

/// Where a list comes from.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Origin {
    /// A keys file (as resolved), its keys numbered by line.
    File(PathBuf),
    /// An environment variable, its keys numbered in order.
    Env(String),
    /// The app's list of this name, its keys numbered in order.
    App(String),
}

impl Origin {
    /// How an error names the key at `n` (a line, or a position).
    pub(super) fn at(&self, n: usize) -> String {
        match self {
            Self::File(path) => format!("keys-file {}, line {n}", path.display()),
            Self::Env(var) => format!("keys-env {var}, key {n}"),
            Self::App(name) => format!("keys-app {name:?}, key {n}"),
        }
    }

    /// The file an error names, for a keys file.
    pub(super) fn file(&self) -> Option<&Path> {
        match self {
            Self::File(path) => Some(path),
            _ => None,
        }
    }
}

/// The keys of one source, each with its line or position.
#[derive(Clone)]
pub(super) struct Source {
    pub(super) origin: Origin,
    pub(super) keys: Vec<(usize, String)>,
}

/// A plan's keys as its file and environment list them.
#[derive(Clone, Default)]
pub(crate) struct Listed(pub(super) Vec<Source>);

impl fmt::Debug for Listed {
    /// The number of keys only: they may be credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: usize = self.0.iter().map(|s| s.keys.len()).sum();
        write!(f, "Listed({keys} keys)")
    }
}

impl Listed {
    /// The keys `plan`'s file and variable list: the file read relative
    /// to `dir` (the policy file's directory) and the variable through
    /// `var`; else why not (an unreadable file, an unset variable, a key
    /// too long).
    pub(super) fn read(
        plan: &Plan,
        dir: Option<&Path>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut sources = Vec::new();
        if let Some(file) = &plan.keys_file {
            let path = match dir {
                Some(dir) if file.is_relative() => dir.join(file),
                _ => file.clone(),
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("keys-file {}: cannot read: {e}", path.display()))?;
            let keys = text
                .lines()
                .enumerate()
                .map(|(i, line)| (i + 1, line.trim()))
                .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
                .map(|(n, line)| (n, line.to_owned()))
                .collect();
            sources.push(Source {
                origin: Origin::File(path),
                keys,
            });
        }
        if let Some(name) = &plan.keys_env {
            let value = var(name)
                .ok_or_else(|| format!("keys-env {name} is not set (set it, empty for no keys)"))?;
            sources.push(Source {
                origin: Origin::Env(name.clone()),
                keys: split(&value),
            });
        }
        let listed = Self(sources);
        listed.checked()?;
        Ok(listed)
    }

    /// The app's list `keys`, named `name`.
    pub(super) fn from_app(name: &str, keys: Vec<String>) -> Source {
        Source {
            origin: Origin::App(name.to_owned()),
            keys: keys
                .into_iter()
                .map(|k| k.trim().to_owned())
                .enumerate()
                .map(|(i, k)| (i + 1, k))
                .collect(),
        }
    }

    /// Whether every key is of a length a key can have; else where one
    /// is not.
    fn checked(&self) -> Result<(), String> {
        for source in &self.0 {
            if let Some((n, key)) = source.keys.iter().find(|(_, k)| k.len() > MAX_KEY_LEN) {
                return Err(format!(
                    "{}: a key of {} characters: at most {MAX_KEY_LEN}",
                    source.origin.at(*n),
                    key.len()
                ));
            }
        }
        Ok(())
    }
}

/// The keys of a variable's value: separated by commas or white space.
fn split(value: &str) -> Vec<(usize, String)> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|k| !k.is_empty())
        .enumerate()
        .map(|(i, k)| (i + 1, k.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn a_variable_lists_keys_by_commas_and_spaces() {
        let keys: Vec<String> = split(" k-1,k-2 \n k-3,,")
            .into_iter()
            .map(|(_, k)| k)
            .collect();
        assert_eq!(keys, ["k-1", "k-2", "k-3"]);
        assert!(split(" , ").is_empty());
    }
}
