//! The table (`PolicyTable`): read from TOML and checked.

use super::entry::PolicyEntry;
use super::error::{PolicyError, Source};
use super::plan::{Plan, NO_PLAN};
use super::plan_list::PlanList;
use crate::access_list::AccessList;
use crate::strategy::Mode;
use ratelimit_core::algorithm::MAX_OVERRIDES;
use ratelimit_core::AnyAlgorithm;
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
    #[serde(default)]
    plan: Vec<toml::Spanned<Plan>>,
}

/// Every limit of an app: see the [module docs](super) for the file.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
///
/// let text = r#"
/// [[limit]]
/// name = "api"
/// algorithm = "gcra 100/1m"
/// key = "peer-ip"
/// routes = ["GET /items"]
/// "#;
/// let table = PolicyTable::from_toml(text, None).unwrap(); // or PolicyTable::load(path)
/// let app: Router = Router::new().route("/items", get(|| async { "[]" }));
/// let (app, limits) = table.apply_in_memory(app, &PolicyOptions::default(), None).unwrap();
/// # let _ = (app, limits);
/// ```
#[derive(Debug, Clone)]
pub struct PolicyTable {
    pub(super) entries: Vec<PolicyEntry>,
    pub(super) allow: AccessList,
    pub(super) deny: AccessList,
    /// The plans, with the keys their files and variables list.
    pub(super) plans: PlanList,
}

impl PolicyTable {
    /// Reads a table from TOML text; `file` names it in errors, and a
    /// plan's `keys-file` is relative to its directory. A plan's
    /// `keys-file` and `keys-env` are read here.
    pub fn from_toml(text: &str, file: Option<&Path>) -> Result<Self, PolicyError> {
        Self::from_toml_with(text, file, &|var: &str| std::env::var(var).ok())
    }

    /// [`from_toml`](Self::from_toml), the environment read through `var`.
    pub(crate) fn from_toml_with(
        text: &str,
        file: Option<&Path>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, PolicyError> {
        let source = Source { text, file };
        let parsed: File = toml::from_str(text).map_err(|e| source.toml_error(&e))?;
        let plans = PlanList::read(parsed.plan, &source, var)?;
        let mut entries: Vec<PolicyEntry> = Vec::with_capacity(parsed.limit.len());
        for spanned in parsed.limit {
            let at = Some(spanned.span().start);
            let entry = spanned.into_inner();
            let name = entry.name.clone();
            let entry = checked(entry, &entries, plans.plans())
                .map_err(|m| source.error(at, Some(name), m))?;
            entries.push(entry);
        }
        if entries.len() > 64 {
            let message = format!("{} limits: at most 64", entries.len());
            return Err(source.error(None, None, message));
        }
        let allow = AccessList::parse(&parsed.allow).map_err(|e| source.error(None, None, e))?;
        let deny = AccessList::parse(&parsed.deny).map_err(|e| source.error(None, None, e))?;
        Ok(Self {
            entries,
            allow,
            deny,
            plans,
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

    /// The plans, in the file's order.
    pub fn plans(&self) -> &[Plan] {
        self.plans.plans()
    }

    /// The lists of every limit: `allow`, then `deny`.
    #[cfg(feature = "redis")]
    pub(crate) fn lists(&self) -> [&AccessList; 2] {
        [&self.allow, &self.deny]
    }
}

/// `entry` checked, on its own and against the `earlier` entries, with its
/// overrides written as its extractor writes keys; else what is wrong.
fn checked(
    mut entry: PolicyEntry,
    earlier: &[PolicyEntry],
    plans: &[Plan],
) -> Result<PolicyEntry, String> {
    if !ratelimit_core::plumbing::is_valid_limit_name(&entry.name) {
        return Err(format!(
            "a name is {}",
            ratelimit_core::plumbing::LIMIT_NAME_RULE
        ));
    }
    if earlier.iter().any(|e| e.name == entry.name) {
        return Err("the name is used twice".to_owned());
    }
    if let Some(plan) = &entry.plan {
        let known = plans.iter().any(|p| p.name == *plan);
        if !known && (plan != NO_PLAN || plans.is_empty()) {
            let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "unknown plan {plan:?}: the [[plan]]s are {names:?}, and \"{NO_PLAN}\" \
                 (requests in no plan) needs one"
            ));
        }
    }
    if entry.mode == Mode::Shape && !matches!(entry.algorithm, AnyAlgorithm::LeakyBucket(_)) {
        return Err("mode \"shape\" needs a leaky-bucket algorithm".to_owned());
    }
    if let Some(problem) = entry.disables_itself() {
        return Err(problem);
    }
    entry.overrides = entry.canonical_overrides()?;
    entry.checked_ban()?;
    entry.checked_ban_key()?;
    entry.checked_settle()?;
    entry.checked_pace()?;
    AccessList::parse(&entry.allow)?;
    AccessList::parse(&entry.deny)?;
    if entry.overrides.len() > MAX_OVERRIDES {
        return Err(format!(
            "{} overrides: at most {MAX_OVERRIDES}",
            entry.overrides.len()
        ));
    }
    Ok(entry)
}
