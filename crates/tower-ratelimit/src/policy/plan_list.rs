//! The `[[plan]]`s of a file (`PlanList`), each checked and its keys file
//! and variable read, with the line it starts on: what a policy table
//! holds, and what `ratelimitd` reads from its own file.

use super::error::{PolicyError, Source};
use super::plan::Plan;
use super::plan_sources::Listed;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The plans of a file, in its order, each checked on its own and against
/// the plans before it, with the keys its `keys-file` and `keys-env` list
/// (read here; an app's list is read when the plans are applied).
///
/// ```
/// use tower_ratelimit::policy::PlanList;
///
/// let text = "[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nkeys-env = \"PRO_KEYS\"\n\n[server]\nhttp = \"x\"\n";
/// let env = |var: &str| (var == "PRO_KEYS").then(|| "k-1, k-2".to_owned());
/// let plans = PlanList::from_toml(text, None, &env).unwrap(); // other sections are not read
/// assert_eq!(plans.plans()[0].name, "pro");
/// let err = PlanList::from_toml(text, None, &|_: &str| None).unwrap_err();
/// assert_eq!(err.line, Some(1));
/// assert!(err.to_string().contains("plan \"pro\": keys-env PRO_KEYS is not set"), "{err}");
/// ```
#[derive(Debug, Clone, Default)]
pub struct PlanList {
    pub(super) plans: Vec<Plan>,
    /// Each plan's keys as its file and environment list them.
    pub(super) listed: Vec<Listed>,
    /// The file, and the line each plan starts on.
    pub(super) file: Option<PathBuf>,
    pub(super) lines: Vec<usize>,
}

/// A file's `[[plan]]`s, whatever else it holds.
#[derive(Deserialize)]
struct Plans {
    #[serde(default)]
    plan: Vec<toml::Spanned<Plan>>,
}

impl PlanList {
    /// The `[[plan]]`s of the TOML `text` (its other sections are not
    /// read); `file` names it in errors, and a `keys-file` is relative to
    /// its directory; `var` reads a `keys-env`. An error names the file,
    /// the line and the plan.
    pub fn from_toml(
        text: &str,
        file: Option<&Path>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, PolicyError> {
        let source = Source { text, file };
        let parsed: Plans = toml::from_str(text).map_err(|e| source.toml_error(&e))?;
        Self::read(parsed.plan, &source, var)
    }

    /// The plans `spanned` of `source`, each checked and its file and
    /// environment read; an error names the plan and its line.
    pub(super) fn read(
        spanned: Vec<toml::Spanned<Plan>>,
        source: &Source<'_>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, PolicyError> {
        let dir = source.file.and_then(Path::parent);
        let mut list = Self {
            file: source.file.map(Path::to_path_buf),
            ..Self::default()
        };
        for spanned in spanned {
            let at = Some(spanned.span().start);
            let plan = spanned.into_inner();
            let fail = |m: String| source.error(at, None, format!("plan {:?}: {m}", plan.name));
            plan.checked(&list.plans).map_err(fail)?;
            list.listed
                .push(Listed::read(&plan, dir, var).map_err(fail)?);
            list.lines
                .push(source.error(at, None, String::new()).line.unwrap_or(1));
            list.plans.push(plan);
        }
        Ok(list)
    }

    /// The plans, in the file's order.
    pub fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// An error about the `i`-th plan, at its line.
    pub(super) fn error(&self, i: usize, message: String) -> PolicyError {
        PolicyError {
            file: self.file.clone(),
            line: self.lines.get(i).copied(),
            entry: None,
            message: format!("plan {:?}: {message}", self.plans[i].name),
        }
    }
}
