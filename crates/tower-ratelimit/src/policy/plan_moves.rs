//! Keys moved between plans while the limits run
//! ([`PolicyHandle::move_to_plan`]): kept across reloads, and shared by
//! every instance when the run-time entries are ([`PolicyHandle::share`]),
//! each key written there as its digest only.

use super::plan::NO_PLAN;
use super::plan_book::{PlanMembers, NONE};
use super::reload::PolicyHandle;
use crate::access_list::MAX_RUNTIME_ENTRIES;
use ratelimit_core::plumbing::{EntryTable, SharedEntry};

impl PolicyHandle {
    /// What a watcher of the table at `path` compares: the file's bytes
    /// (`loaded`, or read now), then each plan's keys file's, so that an
    /// edited list reloads the table too; `None` when the table's file
    /// cannot be read.
    pub(crate) fn watched(
        &self,
        path: &std::path::Path,
        loaded: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let mut all = loaded.or_else(|| std::fs::read(path).ok())?;
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        for file in self
            .plans
            .plans()
            .iter()
            .filter_map(|p| p.keys_file.as_ref())
        {
            all.extend_from_slice(b"\0");
            all.extend(std::fs::read(dir.join(file)).unwrap_or_default());
        }
        Some(all)
    }

    /// The plans, in the file's order, each with its members counted.
    pub fn plans(&self) -> Vec<PlanMembers> {
        self.plans.counts()
    }

    /// Moves `key` (written as the plan's key writes it: an API key, an
    /// address) into the plan `plan`, out of any other, now and across
    /// reloads (a move wins over the plans' lists), on every instance
    /// sharing the entries (see [`share`](Self::share)): written there
    /// first. Its requests then count on `plan`'s limits, each from its own
    /// count: what the key used on its former plan's limits stays there.
    /// Refused: an unknown plan, a key the plan's key cannot be, more than
    /// [`MAX_RUNTIME_ENTRIES`](super::MAX_RUNTIME_ENTRIES) moves, and a
    /// move into a plan with `shared = true` while nothing shares them.
    pub async fn move_to_plan(&self, plan: &str, key: &str) -> Result<(), String> {
        let (p, g, text) = self.plans.member(plan, key)?;
        match self.shared.get() {
            Some(shared) => {
                let entry = SharedEntry {
                    table: EntryTable::Plan,
                    scope: self.plans.scope(g),
                    name: shared.digest().await?.of(&text),
                    value: plan.to_owned(),
                    left: None,
                };
                shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
            }
            None if self.plans.is_shared(p) => {
                return Err(format!(
                    "plan {plan:?} has shared = true, but nothing shares the run-time \
                     entries (PolicyHandle::share)"
                ));
            }
            None => {}
        }
        self.plans.move_here(g, &text, Some(p), None)
    }

    /// Takes `key` out of the plan `plan`, on every instance sharing the
    /// entries: it goes back to the plan its plan's lists give it, or to no
    /// plan when that is `plan`. The key's plan now (`"none"`: no plan),
    /// or `None` when the key was not in `plan`.
    pub async fn remove_from_plan(&self, plan: &str, key: &str) -> Result<Option<String>, String> {
        let (p, g, text) = self.plans.member(plan, key)?;
        let (now, listed) = self.plans.plan_of_text(g, &text);
        if now != p {
            return Ok(None);
        }
        // Out of a plan its lists give it: moved to none.
        let back = if listed == p { NONE } else { listed };
        let mut hash = None;
        if let Some(shared) = self.shared.get() {
            let name = shared.digest().await?.of(&text);
            let scope = self.plans.scope(g);
            if back == listed {
                shared.remove(EntryTable::Plan, &scope, &name).await?;
            } else {
                let entry = SharedEntry {
                    table: EntryTable::Plan,
                    scope,
                    name: name.clone(),
                    value: NO_PLAN.to_owned(),
                    left: None,
                };
                shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
            }
            hash = Some(name);
        }
        if back == listed {
            self.plans.move_here(g, &text, None, hash.as_deref())?;
        } else {
            self.plans.move_here(g, &text, Some(NONE), None)?;
        }
        Ok(Some(self.plans.name(back).to_owned()))
    }
}
