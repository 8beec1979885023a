//! Changing the limits while they run (`PolicyHandle`): reloads, what changed (`LimitChange`), the limits' handles and lists (the file watcher: `watch.rs`).

use super::entry::PolicyEntry;
use super::error::PolicyError;
use super::load::PolicyTable;
use super::runtime_overrides::RuntimeOverrides;
use crate::access_list::{ListKind, RuntimeLists};
use crate::limit_handle::LimitHandle;
use ratelimit_core::plumbing::saturating_nanos;
use ratelimit_core::{AnyAlgorithm, Clock, LiveAlgorithm};
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a reload changed of one limit: its algorithm (`from` and `to`
/// are equal when only overrides changed) and its overrides.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
///
/// let file = |rate: &str| format!("[[limit]]\nname = \"api\"\nalgorithm = \"gcra {rate}\"\nkey = \"peer-ip\"\n");
/// let app = || Router::new().route("/", get(|| async { "hello" }));
/// let table = PolicyTable::from_toml(&file("100/1m"), None).unwrap();
/// let (_app, limits) = table.apply_in_memory(app(), &PolicyOptions::default(), None).unwrap();
/// let changes = limits.reload(&PolicyTable::from_toml(&file("200/1m"), None).unwrap()).unwrap();
/// assert_eq!(changes[0].to.to_string(), "gcra 200/1m");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitChange {
    /// The limit's name.
    pub limit: String,
    /// Its algorithm before the reload.
    pub from: AnyAlgorithm,
    /// Its algorithm after.
    pub to: AnyAlgorithm,
    /// How its overrides changed: `"same"`, or `"N -> M"` (counts; the
    /// keys are not named, as they may be API keys).
    pub overrides: String,
}

impl LimitChange {
    /// The change from what `live` runs to `new` with `overrides` (the
    /// file's and those set at run time), if any.
    pub(super) fn between(
        new: &PolicyEntry,
        overrides: &[(String, AnyAlgorithm)],
        live: &LiveAlgorithm,
    ) -> Option<Self> {
        // Compared by their spec form: a live algorithm may hold the same
        // settings in a wider state.
        let same = |a: &AnyAlgorithm, b: &AnyAlgorithm| a.to_string() == b.to_string();
        let from = live.get();
        let same_overrides = live.overrides() == overrides.len()
            && overrides
                .iter()
                .all(|(k, a)| live.override_of(k.as_str()).is_some_and(|o| same(&o, a)));
        if same(&from, &new.algorithm) && same_overrides {
            return None;
        }
        let overrides = if same_overrides {
            "same".to_owned()
        } else {
            format!("{} -> {}", live.overrides(), overrides.len())
        };
        Some(Self {
            limit: new.name.clone(),
            from,
            to: new.algorithm,
            overrides,
        })
    }
}

/// Changes a table's limits while they run: from another table (a
/// reload), or one key at a time (overrides, through
/// [`limit`](Self::limit)).
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
///
/// let text = "[[limit]]\nname = \"api\"\nalgorithm = \"gcra 100/1m\"\nkey = \"peer-ip\"\n";
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let app = Router::new().route("/", get(|| async { "hello" }));
/// let (_app, limits) = table.apply_in_memory(app, &PolicyOptions::default(), None).unwrap();
/// assert_eq!(limits.limit("api").unwrap().get().to_string(), "gcra 100/1m");
/// assert!(limits.get("api").is_some()); // a LimitHandle on its store
/// ```
///
/// A reload changes each entry's algorithm and overrides (see
/// [`LiveAlgorithm`] for what each key keeps: a change frees nothing; an
/// entry whose algorithm and overrides are unchanged is not touched);
/// anything else (an entry
/// added, removed, renamed or moved, a key, routes, cost, counted
/// statuses, mode, headers) needs a restart, and a table that changes it
/// is rejected whole, naming the entry (the one added or removed) and the
/// field: the running limits stay as they were, and
/// [`watch`](Self::watch) logs why.
pub struct PolicyHandle {
    pub(super) limits: Box<[(PolicyEntry, LiveAlgorithm)]>,
    pub(super) handles: Box<[LimitHandle]>,
    pub(super) runtime: Arc<RuntimeLists>,
    /// Each limit's overrides shared by digest, in `limits`' order.
    pub(super) digests: Box<[Arc<super::digest_overrides::DigestOverrides>]>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) reloads: AtomicU64,
    /// Overrides set at run time ([`set_override`](Self::set_override)).
    pub(super) overrides: RuntimeOverrides,
    /// Where the run-time entries are shared, if they are (see `share`).
    pub(super) shared: std::sync::OnceLock<Arc<dyn ratelimit_core::plumbing::SharedEntries>>,
    /// The plans and their members.
    pub(super) plans: Arc<super::plan_directory::PlanDirectory>,
}

impl fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyHandle")
            .field("limits", &self.limits)
            .field("handles", &self.handles)
            .field("reloads", &self.reloads)
            .finish_non_exhaustive()
    }
}

impl PolicyHandle {
    /// Adds `entry` (canonical) to this instance's lists (see
    /// [`add_to_list`](Self::add_to_list)).
    pub(super) fn add_to_list_here(
        &self,
        kind: ListKind,
        entry: &str,
        ttl: std::time::Duration,
    ) -> Result<(), String> {
        let now = self.clock.now();
        let ttl = saturating_nanos(ttl);
        self.runtime
            .add(kind, entry.trim(), now.saturating_add(ttl), now)
    }

    /// Removes `entry` from this instance's lists; whether it was there.
    pub(super) fn remove_from_list_here(&self, kind: ListKind, entry: &str) -> bool {
        self.runtime.remove(kind, entry.trim())
    }

    /// Sets `key`'s override on `limit` in this instance (see
    /// [`set_override`](Self::set_override)).
    pub(super) fn set_override_here(
        &self,
        limit: &str,
        key: &str,
        algorithm: AnyAlgorithm,
    ) -> Result<(), String> {
        let (entry, live) = self.limit_of(limit)?;
        let text = self.key_text(limit, key)?;
        let capacity = ratelimit_core::Algorithm::limit(&algorithm);
        if capacity < entry.cost {
            return Err(format!(
                "the capacity {capacity} of {algorithm} is below the limit's cost {}: every \
                 request would be refused",
                entry.cost
            ));
        }
        live.set_override(text.as_str(), algorithm)
            .map_err(|e| e.to_string())?;
        self.overrides.set(limit, &text, algorithm);
        Ok(())
    }

    /// Takes `key`'s run-time override on `limit` away in this instance
    /// (see [`remove_override`](Self::remove_override)).
    pub(super) fn remove_override_here(&self, limit: &str, key: &str) -> Result<bool, String> {
        let (entry, live) = self.limit_of(limit)?;
        let text = self.key_text(limit, key)?;
        if !self.overrides.remove(limit, &text) {
            return Ok(false);
        }
        match entry.overrides.get(&text) {
            Some(file) => live
                .set_override(text.as_str(), *file)
                .map_err(|e| e.to_string())?,
            None => {
                live.remove_override(text.as_str());
            }
        }
        Ok(true)
    }

    /// How many overrides were set at run time on `limit`.
    pub fn runtime_overrides(&self, limit: &str) -> usize {
        self.overrides.count(limit)
    }

    fn limit_of(&self, name: &str) -> Result<(&PolicyEntry, &LiveAlgorithm), String> {
        self.limits
            .iter()
            .find(|(e, _)| e.name == name)
            .map(|(e, a)| (e, a))
            .ok_or_else(|| format!("no limit named {name:?}"))
    }

    /// `key` as the limit's extractor writes it.
    pub(super) fn key_text(&self, limit: &str, key: &str) -> Result<String, String> {
        let handle = self
            .get(limit)
            .ok_or_else(|| format!("no limit named {limit:?}"))?;
        Ok(handle.key(key)?.to_string())
    }

    /// The limit named `name`: check, peek, refund, reset, ban and unban
    /// a key in the store its layer uses.
    pub fn get(&self, name: &str) -> Option<&LimitHandle> {
        self.handles.iter().find(|h| h.name == name)
    }

    /// Every limit, in the file's order.
    pub fn handles(&self) -> &[LimitHandle] {
        &self.handles
    }

    /// The entry of the limit `name` as last loaded.
    pub fn entry(&self, name: &str) -> Option<&PolicyEntry> {
        self.limit_of(name).ok().map(|(e, _)| e)
    }

    /// The live algorithm of the entry `name` (to read it, or to add and
    /// remove per-key overrides).
    pub fn limit(&self, name: &str) -> Option<&LiveAlgorithm> {
        self.limit_of(name).ok().map(|(_, a)| a)
    }

    /// The plans and their members: which plan a key is in, keys moved
    /// between plans at run time (shared with every instance once
    /// [`share`](Self::share) is called).
    pub fn plans(&self) -> &Arc<super::plan_directory::PlanDirectory> {
        &self.plans
    }

    /// How many reloads have been applied.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Applies `table`'s algorithms and overrides, and its plans' members
    /// (their lists as `table` read them, and the apps' lists read now),
    /// all or nothing; returns what changed of the limits (nothing, for a
    /// table equal to the running one). A plan added, removed or changed
    /// in its name, key, `keys-app` or `shared` needs a restart.
    ///
    /// With feature `metrics`, counts `ratelimit_reloads_total` by
    /// `outcome`: `applied`, `unchanged` or `rejected`.
    pub fn reload(&self, table: &PolicyTable) -> Result<Vec<LimitChange>, PolicyError> {
        let result = self.try_reload(table);
        #[cfg(feature = "metrics")]
        {
            let outcome = match &result {
                Ok(changes) if changes.is_empty() => "unchanged",
                Ok(_) => "applied",
                Err(_) => "rejected",
            };
            metrics::counter!("ratelimit_reloads_total", "outcome" => outcome).increment(1);
        }
        result
    }

    pub(super) fn try_reload(&self, table: &PolicyTable) -> Result<Vec<LimitChange>, PolicyError> {
        self.same_limits(table)?;
        let members = self.plans.reread(&table.plans)?;
        let merged: Vec<Vec<(String, AnyAlgorithm)>> = table
            .entries
            .iter()
            .map(|new| self.overrides.merged(&new.name, &new.override_list()))
            .collect();
        let changes: Vec<LimitChange> = table
            .entries
            .iter()
            .zip(&merged)
            .zip(self.limits.iter())
            .filter_map(|((new, merged), (_, live))| LimitChange::between(new, merged, live))
            .collect();
        for ((new, merged), (_, live)) in table.entries.iter().zip(&merged).zip(self.limits.iter())
        {
            let list: Vec<(&str, AnyAlgorithm)> =
                merged.iter().map(|(k, a)| (k.as_str(), *a)).collect();
            live.replace(new.algorithm, &list)
                .map_err(|e| reload_error(Some(&new.name), e.to_string()))?;
        }
        self.plans.book.refix(members);
        self.reloads.fetch_add(1, Ordering::Relaxed);
        Ok(changes)
    }

    /// Whether `table` has the running limits, in their order, each
    /// changed in nothing but its algorithm and overrides (what a reload
    /// can change); else which one differs and how.
    fn same_limits(&self, table: &PolicyTable) -> Result<(), PolicyError> {
        let runs = |name: &str| self.limits.iter().any(|(e, _)| e.name == name);
        if let Some(added) = table.entries.iter().find(|e| !runs(&e.name)) {
            if table.entries.len() > self.limits.len() {
                let message = "added: adding a limit needs a restart".to_owned();
                return Err(reload_error(Some(&added.name), message));
            }
        }
        let kept = |name: &str| table.entries.iter().any(|e| e.name == name);
        if let Some((removed, _)) = self.limits.iter().find(|(e, _)| !kept(&e.name)) {
            if table.entries.len() < self.limits.len() {
                let message = "removed: removing a limit needs a restart".to_owned();
                return Err(reload_error(Some(&removed.name), message));
            }
        }
        if table.entries.len() != self.limits.len() {
            return Err(reload_error(
                None,
                format!(
                    "{} limits where {} run: adding or removing a limit needs a restart",
                    table.entries.len(),
                    self.limits.len()
                ),
            ));
        }
        for (new, (old, _)) in table.entries.iter().zip(self.limits.iter()) {
            if new.name != old.name {
                return Err(reload_error(
                    Some(&new.name),
                    format!(
                        "where {:?} runs: renaming or moving a limit needs a restart",
                        old.name
                    ),
                ));
            }
            new.unchanged_but_limits(old).map_err(|field| {
                reload_error(
                    Some(&new.name),
                    format!("changing its {field} needs a restart"),
                )
            })?;
        }
        Ok(())
    }

    /// Reads `path` and applies it ([`reload`](Self::reload)); errors
    /// name the file.
    pub fn reload_file(&self, path: &Path) -> Result<Vec<LimitChange>, PolicyError> {
        let table = match PolicyTable::load(path) {
            Ok(table) => table,
            Err(e) => {
                #[cfg(feature = "metrics")]
                metrics::counter!("ratelimit_reloads_total", "outcome" => "rejected").increment(1);
                return Err(e);
            }
        };
        self.reload(&table).map_err(|mut e| {
            e.file = e.file.or_else(|| Some(path.to_path_buf()));
            e
        })
    }
}

/// A reload's error, about the entry `entry` if one.
fn reload_error(entry: Option<&str>, message: String) -> PolicyError {
    PolicyError {
        file: None,
        line: None,
        entry: entry.map(str::to_owned),
        message,
    }
}
