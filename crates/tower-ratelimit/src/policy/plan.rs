//! One `[[plan]]` of the file (`Plan`): a name, the key that tells its
//! members, and where they are listed; checked on its own and against the
//! plans before it.

use super::entry::parsed;
use super::key::{KeyPart, KeySpec};
use serde::Deserialize;
use std::path::PathBuf;

/// What a limit's `plan` says for the requests in no plan (their plan key
/// missing, malformed, or listed in no plan); no plan may be named so.
pub const NO_PLAN: &str = "none";

/// The most plans of a table.
pub const MAX_PLANS: usize = 64;

/// One `[[plan]]`: its members are the keys its sources list, written as
/// its `key` extracts them from a request; a limit with `plan = "NAME"`
/// counts only its members' requests (see the [module docs](super)).
///
/// ```
/// use tower_ratelimit::policy::PolicyTable;
///
/// let text = r#"
/// [[plan]]
/// name = "pro"
/// key = "api-key"
/// shared = true   # members moved in at run time (or keys-file, keys-env, keys-app)
///
/// [[limit]]
/// name = "pro-requests"
/// plan = "pro"
/// algorithm = "gcra 500/1m"
/// key = "api-key"
/// "#;
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let pro = &table.plans()[0];
/// assert_eq!((pro.name.as_str(), pro.key.to_string()), ("pro", "api-key".to_owned()));
/// assert_eq!(table.entry("pro-requests").unwrap().plan.as_deref(), Some("pro"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Plan {
    /// The plan's name (a limit's `plan`, a label of the metrics).
    pub name: String,
    /// What tells a member: written as a limit's `key`; a request's plan
    /// is the plan listing the key this gives it.
    #[serde(deserialize_with = "parsed")]
    pub key: KeySpec,
    /// A file listing members, one key per line (blank lines and lines
    /// starting with `#` skipped); relative to the policy file's directory.
    #[serde(default)]
    pub keys_file: Option<PathBuf>,
    /// An environment variable listing members, separated by commas or
    /// white space; unset is an error.
    #[serde(default)]
    pub keys_env: Option<String>,
    /// A list of members the app gives (`PolicyOptions::plan_keys`), read
    /// at apply and at each reload.
    #[serde(default)]
    pub keys_app: Option<String>,
    /// Members set while the limits run (the admin API's moves), shared
    /// through the run-time entries' store; without one, refused.
    #[serde(default)]
    pub shared: bool,
}

impl Plan {
    /// Whether it lists members anywhere.
    fn has_source(&self) -> bool {
        self.keys_file.is_some()
            || self.keys_env.is_some()
            || self.keys_app.is_some()
            || self.shared
    }

    /// Why this plan cannot be, among the plans `earlier`, if it cannot.
    pub(super) fn checked(&self, earlier: &[Plan]) -> Result<(), String> {
        if !ratelimit_core::plumbing::is_valid_limit_name(&self.name) {
            return Err(format!(
                "a name is {}",
                ratelimit_core::plumbing::LIMIT_NAME_RULE
            ));
        }
        if self.name == NO_PLAN {
            return Err(format!(
                "\"{NO_PLAN}\" is the plan of requests in no plan: name the plan otherwise"
            ));
        }
        if earlier.iter().any(|p| p.name == self.name) {
            return Err("the name is used twice".to_owned());
        }
        if earlier.len() >= MAX_PLANS {
            return Err(format!("at most {MAX_PLANS} plans"));
        }
        if !self.has_source() {
            return Err(
                "no members: give keys-file, keys-env, keys-app, or shared = true".to_owned(),
            );
        }
        let shared_by_all = |p: &KeyPart| matches!(p, KeyPart::Global | KeyPart::Route);
        if self.key.0.iter().any(shared_by_all) {
            return Err(format!(
                "key {:?}: a plan's key tells one client from another (no global or route)",
                self.key.to_string()
            ));
        }
        if self.keys_env.as_deref().is_some_and(str::is_empty)
            || self.keys_app.as_deref().is_some_and(str::is_empty)
        {
            return Err("keys-env and keys-app name something: not empty".to_owned());
        }
        Ok(())
    }

    /// Whether `other` is this plan but for where its members are listed
    /// in files and the environment (what a reload can change); else the
    /// field that differs.
    pub(super) fn unchanged_but_lists(&self, other: &Plan) -> Result<(), &'static str> {
        let checks = [
            (self.name == other.name, "name"),
            (self.key == other.key, "key"),
            (self.keys_app == other.keys_app, "keys-app"),
            (self.shared == other.shared, "shared"),
        ];
        match checks.iter().find(|(same, _)| !same) {
            Some((_, field)) => Err(field),
            None => Ok(()),
        }
    }
}
