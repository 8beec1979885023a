//! Overrides of a limit keyed on a secret (an API key, a token) that this
//! instance knows only by their digest: another instance set them, and
//! shared them as digests (see `PolicyHandle::share`). A request whose
//! key has the digest gets the override: it is set on the limit's live
//! algorithm under the key, at the key's first request here (and again
//! after a reload replaced the overrides).

use crate::access_list::KeyProbe;
use crate::policy::key::PolicyKey;
use ratelimit_core::plumbing::EntryDigest;
use ratelimit_core::{AnyAlgorithm, LiveAlgorithm};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One override known by its digest.
struct Wanted {
    algorithm: AnyAlgorithm,
    /// The key's text, once a request showed it here (kept in memory
    /// only, to take the override away again).
    key: Option<String>,
    /// Whether the live algorithm refused it (at its cap): not tried
    /// again for that key.
    refused: bool,
}

#[derive(Default)]
struct State {
    digest: Option<EntryDigest>,
    /// By digest.
    wanted: HashMap<String, Wanted>,
}

/// A limit's overrides known by digest. Read by its requests only while
/// it has one (a flag, else nothing); a request then costs one digest of
/// its key and two hash lookups, whatever their number.
pub(crate) struct DigestOverrides {
    any: AtomicBool,
    live: LiveAlgorithm,
    state: RwLock<State>,
}

impl DigestOverrides {
    /// None yet, for the limit running `live`.
    pub(crate) fn new(live: LiveAlgorithm) -> Self {
        Self {
            any: AtomicBool::new(false),
            live,
            state: RwLock::default(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it has one.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Gives `key` (its text and digest in `probe`) the override its
    /// digest has, if any and if the live algorithm does not have it yet.
    pub(crate) fn apply(&self, key: &PolicyKey, probe: &KeyProbe<'_>) {
        let algorithm = {
            let state = self.read();
            let Some(digest) = &state.digest else { return };
            let Some(wanted) = state.wanted.get(probe.digest(digest)) else {
                return;
            };
            let known = wanted.key.as_deref() == Some(probe.text());
            if known && (wanted.refused || self.live.override_of(key) == Some(wanted.algorithm)) {
                return;
            }
            wanted.algorithm
        };
        // Under the write lock, so that a copy that takes the override
        // away does not cross it.
        let mut state = self.write();
        let Some(digest) = state.digest.clone() else {
            return;
        };
        let Some(wanted) = state.wanted.get_mut(probe.digest(&digest)) else {
            return;
        };
        if wanted.algorithm != algorithm {
            return;
        }
        wanted.key = Some(probe.text().to_owned());
        if let Err(e) = self.live.set_override(key, algorithm) {
            wanted.refused = true;
            tracing::warn!(error = %e, "a shared override is not applied here");
        }
    }

    /// Makes `wanted` (algorithms by digest, by `digest`) the overrides
    /// known by digest; the keys of those gone that requests showed here,
    /// whose override the caller takes away.
    pub(crate) fn replace(
        &self,
        wanted: HashMap<String, AnyAlgorithm>,
        digest: &EntryDigest,
    ) -> Vec<String> {
        let mut state = self.write();
        let mut fresh = HashMap::with_capacity(wanted.len());
        for (hash, algorithm) in wanted {
            let key = state.wanted.remove(&hash).and_then(|w| w.key);
            let refused = false;
            fresh.insert(
                hash,
                Wanted {
                    algorithm,
                    key,
                    refused,
                },
            );
        }
        let gone = std::mem::replace(&mut state.wanted, fresh);
        state.digest = Some(digest.clone());
        self.any.store(!state.wanted.is_empty(), Ordering::Release);
        gone.into_values().filter_map(|w| w.key).collect()
    }

    /// Forgets the override of digest `hash` (removed through this
    /// instance); the key a request showed for it here, if one did.
    pub(crate) fn remove(&self, hash: &str) -> Option<String> {
        let mut state = self.write();
        let gone = state.wanted.remove(hash).and_then(|w| w.key);
        self.any.store(!state.wanted.is_empty(), Ordering::Release);
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::HeaderKey;

    fn algorithm(spec: &str) -> AnyAlgorithm {
        spec.parse().unwrap()
    }

    #[test]
    fn an_override_known_by_digest_applies_from_the_keys_first_request() {
        let digest =
            EntryDigest::new(|t: &str| u128::from(ratelimit_core::algorithm::stable_hash(t)));
        let live = LiveAlgorithm::new(algorithm("fixed-window 2/1d"));
        let overrides = DigestOverrides::new(live.clone());
        assert!(!overrides.is_set());
        let ten = algorithm("fixed-window 10/1d");
        let wanted = HashMap::from([(digest.of("sk-live-1"), ten)]);
        assert!(overrides.replace(wanted.clone(), &digest).is_empty());
        assert!(overrides.is_set());
        let key = PolicyKey::Text(HeaderKey::secret(b"sk-live-1"));
        let other = PolicyKey::Text(HeaderKey::secret(b"sk-live-2"));
        assert_eq!(live.override_of(&key), None);
        for k in [&key, &other] {
            let text = k.to_string();
            overrides.apply(k, &KeyProbe::new(&text));
        }
        assert_eq!(live.override_of(&key), Some(ten));
        assert_eq!(live.override_of(&other), None);
        // A reload took it away: the next request sets it again.
        live.remove_override(&key);
        overrides.apply(&key, &KeyProbe::new("sk-live-1"));
        assert_eq!(live.override_of(&key), Some(ten));
        // Kept by a copy that still has it; handed back once gone.
        assert!(overrides.replace(wanted, &digest).is_empty());
        assert_eq!(overrides.replace(HashMap::new(), &digest), ["sk-live-1"]);
        assert!(!overrides.is_set());
        let wanted = HashMap::from([(digest.of("sk-live-2"), ten)]);
        overrides.replace(wanted, &digest);
        assert_eq!(overrides.remove(&digest.of("sk-live-2")), None);
        assert!(!overrides.is_set());
    }
}
