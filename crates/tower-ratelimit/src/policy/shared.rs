//! Run-time lists, overrides and plan moves shared by every instance
//! ([`PolicyHandle::share`]): changes written through a
//! [`SharedEntries`], and its copies of every instance's entries applied
//! here. What may be a credential (a list's key entry, an override's key
//! on a limit keyed on a secret) is written as its digest
//! ([`SharedEntries::digest`]) and matched here by it.

use super::reload::PolicyHandle;
use crate::access_list::{AccessList, ListKind, MAX_RUNTIME_ENTRIES};
use ratelimit_core::algorithm::MAX_OVERRIDES;
use ratelimit_core::plumbing::{
    saturating_nanos, EntryDigest, EntryTable, SharedEntries, SharedEntry,
};
use ratelimit_core::AnyAlgorithm;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

fn table_of(kind: ListKind) -> EntryTable {
    match kind {
        ListKind::Allow => EntryTable::Allow,
        ListKind::Deny => EntryTable::Deny,
    }
}

/// The name a list's entry `name` (canonical) is shared under: a key's
/// digest (it may be an API key), a network as itself.
async fn list_name(shared: &dyn SharedEntries, name: &str) -> Result<String, String> {
    if AccessList::is_key(name) {
        Ok(shared.digest().await?.of(name))
    } else {
        Ok(name.to_owned())
    }
}

/// The overrides of a shared copy: by limit and key text, and, for keys
/// shared by digest, by limit and digest.
type Plain<'a> = BTreeMap<(&'a str, &'a str), AnyAlgorithm>;
type Hashed<'a> = BTreeMap<&'a str, HashMap<String, AnyAlgorithm>>;

impl PolicyHandle {
    /// Shares the entries added at run time (allow and deny list entries,
    /// overrides, keys moved between plans) with every instance through
    /// `shared` (a Redis one: `ratelimit_redis::RedisEntries`):
    /// [`add_to_list`](Self::add_to_list),
    /// [`set_override`](Self::set_override),
    /// [`PlanDirectory::move_to_plan`](super::PlanDirectory::move_to_plan) and their removals write
    /// there first, and every instance's copy is applied here whenever
    /// `shared` hands it over (replacing this instance's run-time list
    /// entries, overrides and moves). Requests read only the local
    /// copy. A list's key entry, an override's key on a limit keyed
    /// on a secret (an API key, a token), and a moved key are written as
    /// their digest only; a request matches them by its key's digest (computed once,
    /// and only while there is such an entry). Once; a second call is
    /// refused. Needs a tokio runtime.
    pub fn share(self: &Arc<Self>, shared: Arc<dyn SharedEntries>) -> Result<(), String> {
        self.shared
            .set(Arc::clone(&shared))
            .map_err(|_| "the run-time entries are shared already".to_owned())?;
        self.plans.use_shared(Arc::clone(&shared))?;
        let handle = Arc::downgrade(self);
        shared.follow(Arc::new(move |entries, digest| {
            if let Some(handle) = handle.upgrade() {
                handle.apply_shared(entries, &digest);
            }
        }));
        Ok(())
    }

    /// Adds `entry` (a CIDR, an address or a key, as in the file) to the
    /// allow or deny list of every limit for `ttl`, or renews it; at most
    /// [`MAX_RUNTIME_ENTRIES`](super::MAX_RUNTIME_ENTRIES) per list. Kept
    /// in memory and across reloads, on every instance sharing the entries
    /// (see [`share`](Self::share)); here only when not shared.
    pub async fn add_to_list(
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
                name: list_name(shared.as_ref(), &name).await?,
                value: String::new(),
                left: Some(ttl),
            };
            shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
        }
        self.add_to_list_here(kind, &name, ttl)
    }

    /// Removes `entry` added by [`add_to_list`](Self::add_to_list), on
    /// every instance sharing the entries; whether it was there.
    pub async fn remove_from_list(&self, kind: ListKind, entry: &str) -> Result<bool, String> {
        let Ok(name) = AccessList::canonical(entry) else {
            return Ok(false);
        };
        let there = match self.shared.get() {
            Some(shared) => {
                let shared_name = list_name(shared.as_ref(), &name).await?;
                shared.remove(table_of(kind), "", &shared_name).await?
            }
            None => false,
        };
        Ok(self.remove_from_list_here(kind, &name) || there)
    }

    /// The name `key` of `limit` is shared under: its digest when the
    /// limit's key is a secret (an API key, a token), else its text.
    async fn override_name(
        &self,
        shared: &dyn SharedEntries,
        limit: &str,
        key: &str,
    ) -> Result<String, String> {
        let handle = self
            .get(limit)
            .ok_or_else(|| format!("no limit named {limit:?}"))?;
        let key = handle.key(key)?;
        let text = key.to_string();
        if ratelimit_core::algorithm::StableKey::is_secret(&key) {
            Ok(shared.digest().await?.of(&text))
        } else {
            Ok(text)
        }
    }

    /// Gives `key` (written as the limit's key extractor writes keys: an
    /// IP, a network as `2001:db8::/64`, an API key) its own algorithm on
    /// the limit `limit`, now and across reloads (it wins over the
    /// file's override of that key), on every instance sharing the
    /// entries: set here (and checked) first, then written for the others
    /// (and taken back here if that fails). Refused: an unknown limit, a
    /// key the limit cannot have, an algorithm whose capacity is below the
    /// limit's cost (every request refused), or more than
    /// [`MAX_OVERRIDES`](ratelimit_core::algorithm::MAX_OVERRIDES).
    pub async fn set_override(
        &self,
        limit: &str,
        key: &str,
        algorithm: AnyAlgorithm,
    ) -> Result<(), String> {
        self.set_override_here(limit, key, algorithm)?;
        let Some(shared) = self.shared.get() else {
            return Ok(());
        };
        let written = match self.override_name(shared.as_ref(), limit, key).await {
            Ok(name) => {
                let entry = SharedEntry {
                    table: EntryTable::Override,
                    scope: limit.to_owned(),
                    name,
                    value: algorithm.to_string(),
                    left: None,
                };
                let cap = MAX_OVERRIDES.saturating_mul(self.limits.len());
                shared.put(entry, cap).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let _ = self.remove_override_here(limit, key);
            return Err(e);
        }
        Ok(())
    }

    /// Takes away the override [`set_override`](Self::set_override) gave
    /// `key` on `limit`, on every instance sharing the entries: the key
    /// follows the file again (its override there, else the limit's
    /// algorithm). Whether there was one.
    pub async fn remove_override(&self, limit: &str, key: &str) -> Result<bool, String> {
        let there = match self.shared.get() {
            Some(shared) => {
                let name = self.override_name(shared.as_ref(), limit, key).await?;
                self.forget_digest(limit, &name);
                shared.remove(EntryTable::Override, limit, &name).await?
            }
            None => false,
        };
        Ok(self.remove_override_here(limit, key)? || there)
    }

    /// Forgets `limit`'s override known by the digest `name` (if it is
    /// one), taking it away from the key a request showed for it here.
    fn forget_digest(&self, limit: &str, name: &str) {
        if !EntryDigest::is_digest(name) {
            return;
        }
        let Some(i) = self.limits.iter().position(|(e, _)| e.name == limit) else {
            return;
        };
        if let Some(text) = self.digests[i].remove(name) {
            self.restore(i, &text);
        }
    }

    /// Takes the override learned by digest for the key `text` of the
    /// `i`-th limit away: the key follows the file again (its override
    /// there, else the limit's algorithm), unless it has a run-time
    /// override of its own here.
    fn restore(&self, i: usize, text: &str) {
        let (entry, live) = &self.limits[i];
        if self.overrides.has(&entry.name, text) {
            return;
        }
        match entry.overrides.get(text) {
            Some(file) => {
                let _ = live.set_override(text, *file);
            }
            None => {
                live.remove_override(text);
            }
        }
    }

    /// Makes this instance's run-time entries those of `entries` (every
    /// instance's, as the shared copy holds them, its digests by
    /// `digest`).
    fn apply_shared(&self, entries: Vec<SharedEntry>, digest: &EntryDigest) {
        self.plans.book.replace_moved(&entries, digest);
        let now = self.clock.now();
        let until = |left: Option<Duration>| {
            left.map_or(u64::MAX, |l| now.saturating_add(saturating_nanos(l)))
        };
        for kind in [ListKind::Allow, ListKind::Deny] {
            let of_kind = entries.iter().filter(|e| e.table == table_of(kind));
            self.runtime.replace(
                kind,
                of_kind.map(|e| (e.name.as_str(), until(e.left))),
                digest,
            );
        }
        let mut plain = Plain::new();
        let mut hashed = Hashed::new();
        for e in entries.iter().filter(|e| e.table == EntryTable::Override) {
            let Ok(algorithm) = e.value.parse::<AnyAlgorithm>() else {
                continue;
            };
            if EntryDigest::is_digest(&e.name) {
                let of_limit = hashed.entry(e.scope.as_str()).or_default();
                of_limit.insert(e.name.clone(), algorithm);
            } else {
                plain.insert((e.scope.as_str(), e.name.as_str()), algorithm);
            }
        }
        self.apply_overrides(&plain, &hashed, digest);
        for (i, (entry, _)) in self.limits.iter().enumerate() {
            let wanted = hashed.remove(entry.name.as_str()).unwrap_or_default();
            for text in self.digests[i].replace(wanted, digest) {
                self.restore(i, &text);
            }
        }
    }

    /// Sets and removes run-time overrides until they are `plain`'s
    /// (keeping those whose digest `hashed` has).
    fn apply_overrides(&self, plain: &Plain<'_>, hashed: &Hashed<'_>, digest: &EntryDigest) {
        let same = |a: &AnyAlgorithm, b: &AnyAlgorithm| a.to_string() == b.to_string();
        let current = self.overrides.all();
        for (limit, key, _) in &current {
            let by_digest = || {
                hashed
                    .get(limit.as_str())
                    .is_some_and(|h| h.contains_key(&digest.of(key)))
            };
            if !plain.contains_key(&(limit.as_str(), key.as_str())) && !by_digest() {
                let _ = self.remove_override_here(limit, key);
            }
        }
        for (&(limit, key), algorithm) in plain {
            let held = current
                .iter()
                .any(|(l, k, a)| l == limit && k == key && same(a, algorithm));
            if held {
                continue;
            }
            if let Err(e) = self.set_override_here(limit, key, *algorithm) {
                tracing::warn!(limit, error = %e, "a shared override is not applied here");
            }
        }
    }
}
