//! Per-key overrides set while the limits run (an admin API's), kept across reloads.

use ratelimit_core::AnyAlgorithm;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// The overrides set at run time, by limit and by key text. A reload
/// applies the file's overrides and then these, which win.
#[derive(Debug, Default)]
pub(super) struct RuntimeOverrides {
    map: Mutex<BTreeMap<String, BTreeMap<String, AnyAlgorithm>>>,
}

impl RuntimeOverrides {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, BTreeMap<String, AnyAlgorithm>>) -> T,
    ) -> T {
        f(&mut self.map.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records `algorithm` for `key` on `limit`.
    pub(super) fn set(&self, limit: &str, key: &str, algorithm: AnyAlgorithm) {
        self.with(|m| {
            m.entry(limit.to_owned())
                .or_default()
                .insert(key.to_owned(), algorithm)
        });
    }

    /// Forgets `key`'s override on `limit`; whether there was one.
    pub(super) fn remove(&self, limit: &str, key: &str) -> bool {
        self.with(|m| {
            m.get_mut(limit)
                .is_some_and(|keys| keys.remove(key).is_some())
        })
    }

    /// Whether `key` has one on `limit`.
    pub(super) fn has(&self, limit: &str, key: &str) -> bool {
        self.with(|m| m.get(limit).is_some_and(|keys| keys.contains_key(key)))
    }

    /// How many overrides `limit` has here.
    pub(super) fn count(&self, limit: &str) -> usize {
        self.with(|m| m.get(limit).map_or(0, BTreeMap::len))
    }

    /// Every override set at run time, as `(limit, key, algorithm)`.
    pub(super) fn all(&self) -> Vec<(String, String, AnyAlgorithm)> {
        self.with(|m| {
            m.iter()
                .flat_map(|(limit, keys)| {
                    keys.iter()
                        .map(move |(k, a)| (limit.clone(), k.clone(), *a))
                })
                .collect()
        })
    }

    /// `file`'s overrides of `limit` with these over them.
    pub(super) fn merged(
        &self,
        limit: &str,
        file: &[(&str, AnyAlgorithm)],
    ) -> Vec<(String, AnyAlgorithm)> {
        let mut all: BTreeMap<String, AnyAlgorithm> =
            file.iter().map(|(k, a)| ((*k).to_owned(), *a)).collect();
        self.with(|m| {
            if let Some(keys) = m.get(limit) {
                all.extend(keys.iter().map(|(k, a)| (k.clone(), *a)));
            }
        });
        all.into_iter().collect()
    }
}
