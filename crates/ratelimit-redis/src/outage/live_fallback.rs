//! The in-memory fallback of a live store: one memory store that every
//! version of the settings (and every override) decides in, so that a
//! change keeps each key's used quota there too.

use ratelimit_core::{AnyAlgorithm, BanPolicy, LiveAlgorithm, MemoryStore};

/// The memory a `LiveRedis`'s stores fall back to,
/// shared by all of them: one [`MemoryStore`] of a [`LiveAlgorithm`] of
/// its own, which follows the live store's settings. A change of the
/// settings is a change of this algorithm, so each key carries over in
/// memory exactly as in a memory-only store (`ratelimit-core`'s `live`),
/// after any number of changes; nothing is started afresh.
///
/// A key checked through an override's store gets that override here,
/// set when its check first reaches the fallback (by the name the key
/// goes by in the store, which for a secret key is its keyed hash). A
/// change of the live store's settings drops them; each comes back with
/// its key's next check.
#[derive(Debug)]
pub(crate) struct LiveMemory {
    /// What the memory decides under: the live store's default, and the
    /// overrides its keys have come with.
    settings: LiveAlgorithm,
    store: MemoryStore<LiveAlgorithm, String>,
}

impl LiveMemory {
    /// Memory of at most `max_keys` keys under `default`, banning as
    /// `ban` says.
    pub(crate) fn new(default: AnyAlgorithm, max_keys: usize, ban: Option<BanPolicy>) -> Self {
        let settings = LiveAlgorithm::new(default);
        let store = MemoryStore::<LiveAlgorithm, String>::builder(settings.clone())
            .max_keys(Some(max_keys))
            .ban(ban)
            .build()
            .expect("a cap of at least 1 key (checked by the store's build)");
        Self { settings, store }
    }

    /// Follows the live store's new default: the overrides go (each comes
    /// back with its key). Settings in force already change nothing.
    pub(crate) fn follow(&self, default: AnyAlgorithm) {
        // No overrides: never more than MAX_OVERRIDES.
        let _ = self.settings.replace::<str>(default, &[]);
    }

    /// The memory store, with `key` under `algorithm` (the settings of
    /// the store asking) first. Past `MAX_OVERRIDES` overrides, a key
    /// stays under the default.
    pub(crate) fn with(
        &self,
        key: &str,
        algorithm: &AnyAlgorithm,
    ) -> &MemoryStore<LiveAlgorithm, String> {
        let (_, current) = self.settings.algorithm_for(key);
        if current != *algorithm {
            if *algorithm == self.settings.get() {
                self.settings.remove_override(key);
            } else if self.settings.set_override(key, *algorithm).is_err() {
                tracing::debug!(
                    target: "ratelimit_redis",
                    "too many overrides in the in-memory fallback; a key is decided under the default"
                );
            }
        }
        &self.store
    }

    /// The memory store, as it is.
    pub(crate) fn store(&self) -> &MemoryStore<LiveAlgorithm, String> {
        &self.store
    }
}
