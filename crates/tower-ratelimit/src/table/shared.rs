//! Run-time lists and overrides shared by every instance
//! ([`PolicyHandle::share`]): changes written through a
//! [`SharedEntries`], and its copies of every instance's entries applied
//! here.

use super::reload::PolicyHandle;
use crate::access_list::{AccessList, ListKind, MAX_RUNTIME_ENTRIES};
use ratelimit_core::{
    saturating_nanos, AnyAlgorithm, EntryTable, SharedEntries, SharedEntry, MAX_OVERRIDES,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn table_of(kind: ListKind) -> EntryTable {
    match kind {
        ListKind::Allow => EntryTable::Allow,
        ListKind::Deny => EntryTable::Deny,
    }
}

impl PolicyHandle {
    /// Shares the entries added at run time (allow and deny list entries,
    /// overrides) with every instance through `shared` (a Redis one:
    /// `ratelimit_redis::RedisEntries`): the `*_shared` methods write
    /// there first, and every instance's copy is applied here whenever
    /// `shared` hands it over (replacing this instance's run-time list
    /// entries and overrides: once shared, entries added with the local
    /// methods last until the next copy). Requests read only the local
    /// copy. Once; a second call is refused. Needs a tokio runtime.
    pub fn share(self: &Arc<Self>, shared: Arc<dyn SharedEntries>) -> Result<(), String> {
        self.shared
            .set(Arc::clone(&shared))
            .map_err(|_| "the run-time entries are shared already".to_owned())?;
        let handle = Arc::downgrade(self);
        shared.follow(Arc::new(move |entries| {
            if let Some(handle) = handle.upgrade() {
                handle.apply_shared(entries);
            }
        }));
        Ok(())
    }

    /// [`add_to_list`](Self::add_to_list) on every instance sharing the
    /// entries (see [`share`](Self::share)); here only when not shared.
    pub async fn add_to_list_shared(
        &self,
        kind: ListKind,
        entry: &str,
        ttl: Duration,
    ) -> Result<(), String> {
        let name = AccessList::canonical(entry)?;
        if let Some(shared) = self.shared.get() {
            let entry = SharedEntry {
                table: table_of(kind),
                scope: String::new(),
                name: name.clone(),
                value: String::new(),
                left: Some(ttl),
            };
            shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
        }
        self.add_to_list(kind, &name, ttl)
    }

    /// [`remove_from_list`](Self::remove_from_list) on every instance
    /// sharing the entries; whether it was there.
    pub async fn remove_from_list_shared(
        &self,
        kind: ListKind,
        entry: &str,
    ) -> Result<bool, String> {
        let Ok(name) = AccessList::canonical(entry) else {
            return Ok(false);
        };
        let there = match self.shared.get() {
            Some(shared) => shared.remove(table_of(kind), "", &name).await?,
            None => false,
        };
        Ok(self.remove_from_list(kind, &name) || there)
    }

    /// [`set_override`](Self::set_override) on every instance sharing the
    /// entries: set here (and checked) first, then written for the others
    /// (and taken back here if that fails).
    pub async fn set_override_shared(
        &self,
        limit: &str,
        key: &str,
        algorithm: AnyAlgorithm,
    ) -> Result<(), String> {
        self.set_override(limit, key, algorithm)?;
        let Some(shared) = self.shared.get() else {
            return Ok(());
        };
        let entry = SharedEntry {
            table: EntryTable::Override,
            scope: limit.to_owned(),
            name: self.key_text(limit, key)?,
            value: algorithm.to_string(),
            left: None,
        };
        let cap = MAX_OVERRIDES.saturating_mul(self.limits.len());
        if let Err(e) = shared.put(entry, cap).await {
            let _ = self.remove_override(limit, key);
            return Err(e);
        }
        Ok(())
    }

    /// [`remove_override`](Self::remove_override) on every instance
    /// sharing the entries; whether there was one.
    pub async fn remove_override_shared(&self, limit: &str, key: &str) -> Result<bool, String> {
        let name = self.key_text(limit, key)?;
        let there = match self.shared.get() {
            Some(shared) => shared.remove(EntryTable::Override, limit, &name).await?,
            None => false,
        };
        Ok(self.remove_override(limit, key)? || there)
    }

    /// Makes this instance's run-time entries those of `entries` (every
    /// instance's, as the shared copy holds them).
    fn apply_shared(&self, entries: Vec<SharedEntry>) {
        let now = self.clock.now();
        let until = |left: Option<Duration>| {
            left.map_or(u64::MAX, |l| now.saturating_add(saturating_nanos(l)))
        };
        for kind in [ListKind::Allow, ListKind::Deny] {
            let of_kind = entries.iter().filter(|e| e.table == table_of(kind));
            self.runtime
                .replace(kind, of_kind.map(|e| (e.name.as_str(), until(e.left))));
        }
        let wanted: BTreeMap<(&str, &str), AnyAlgorithm> = entries
            .iter()
            .filter(|e| e.table == EntryTable::Override)
            .filter_map(|e| Some(((e.scope.as_str(), e.name.as_str()), e.value.parse().ok()?)))
            .collect();
        self.apply_overrides(&wanted);
    }

    /// Sets and removes run-time overrides until they are `wanted`'s.
    fn apply_overrides(&self, wanted: &BTreeMap<(&str, &str), AnyAlgorithm>) {
        let same = |a: &AnyAlgorithm, b: &AnyAlgorithm| a.to_string() == b.to_string();
        let current = self.overrides.all();
        for (limit, key, _) in &current {
            if !wanted.contains_key(&(limit.as_str(), key.as_str())) {
                let _ = self.remove_override(limit, key);
            }
        }
        for (&(limit, key), algorithm) in wanted {
            let held = current
                .iter()
                .any(|(l, k, a)| l == limit && k == key && same(a, algorithm));
            if held {
                continue;
            }
            if let Err(e) = self.set_override(limit, key, *algorithm) {
                tracing::warn!(limit, error = %e, "a shared override is not applied here");
            }
        }
    }
}
