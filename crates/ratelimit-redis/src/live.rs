//! A Redis store following a `LiveAlgorithm`: settings changed while it
//! runs, keeping each key's used quota, with per-key overrides.

use crate::fleet::lease::Unspent;
use crate::{RedisBuildError, RedisStore, RedisStoreBuilder, Target};
use arc_swap::ArcSwap;
use ratelimit_core::algorithm::{StableKey, MAX_OVERRIDES};
use ratelimit_core::store::{StoreCounts, Upkeep};
#[cfg(doc)]
use ratelimit_core::Store;
use ratelimit_core::{AnyAlgorithm, LiveAlgorithm};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The deny cache and lease table of an override's store, in keys: an
/// override is for a few clients, and there may be many overrides.
const OVERRIDE_TABLES: usize = 64;

/// A Redis store following a [`LiveAlgorithm`]: its settings and per-key
/// overrides change while it runs, and each key keeps its used quota, as
/// in memory. Built by [`LiveRedis::builder`] (or
/// `StoreSettings::build` given a `LiveAlgorithm`); used as a [`Store`]
/// through [`store_for`](Self::store_for), or through `AnyStore`.
///
/// ```no_run
/// use ratelimit_core::{AnyAlgorithm, LiveAlgorithm, Store};
/// use ratelimit_redis::LiveRedis;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let live = LiveAlgorithm::new("gcra 3/1h".parse::<AnyAlgorithm>()?);
/// let store = LiveRedis::builder("redis://127.0.0.1/", &live).build()?;
/// store.store_for("k").check("k", 2, 0).await?;
/// live.set("gcra 4/1h".parse::<AnyAlgorithm>()?);
/// // 2 used of a new 4 leaves 2, in Redis.
/// assert_eq!(store.store_for("k").check("k", 0, 0).await?.remaining, 2);
/// // One client with 10 times the quota, until the override is removed.
/// live.set_override("vip", "gcra 30/1h".parse::<AnyAlgorithm>()?)?;
/// # Ok(()) }
/// ```
///
/// # Keys and carry-over
///
/// A key's state lives at `{prefix}{key}:live` whatever the settings, and
/// is written with a stamp of the settings it was written under. Each check
/// and refund sends the key's current settings (its override, or the
/// default) to the script, which, finding a state under another stamp,
/// carries it over first, exactly as [`LiveAlgorithm`] does in memory (the
/// integration tests compare the two decision by decision). The rule: a
/// change frees nothing. What a key has used (past the limit if it was
/// over it) is still used under the new settings, never capped at a
/// smaller limit, so a limit lowered and raised back grants nothing:
///
/// | old and new kind | what carries over |
/// |---|---|
/// | gcra or token-bucket, to either | the quota used, rescaled to the new `T` (rounded up), past the new burst if so: 2 used of a new 4 leaves 2 |
/// | leaky-bucket | the queue's length, in requests, past the new queue if so |
/// | fixed-window | the count of the window open now, whole, in the new window holding now (a first-request window keeps its start while the new period has not passed since, else opens now) |
/// | sliding-log | every entry counting now; those a shorter period would drop at once count as made at `now - P' + 1` |
/// | sliding-window | the same period: both counts; another: the old estimate now (rounded up), as the new window's count |
/// | any other change of kind | the quota used, in whole requests, charged now under the new settings (the old state is deleted) |
///
/// A state in Redis carries its own stamp: it carries over after any
/// number of changes, until its TTL ends it (once full again). A change
/// that changes nothing makes no version of the [`LiveAlgorithm`], so
/// this store starts no new deny cache or lease table for it.
///
/// # Overrides
///
/// A key with an override ([`LiveAlgorithm::set_override`], at most
/// [`MAX_OVERRIDES`]) is checked under its own settings, on the same key:
/// adding or removing the override carries its state over like any
/// change. Each distinct override algorithm gets a store of its own on the
/// same connection, built on first use, with a small deny cache and lease
/// table (64 keys).
///
/// # Several instances
///
/// Each instance follows its own [`LiveAlgorithm`] (its own reload of the
/// file). Between two instances' reloads, each decides under its own
/// settings on the same state, carrying a key over to its settings when
/// it touches it, as one instance would on a change there and back: each
/// carry rounds the quota used up and caps nothing, so a client may lose
/// a fraction of a request, never gain one. Once every instance has
/// reloaded they agree again. (A version shared through Redis would leave the same window:
/// each instance picks it up on its next read.) The tests cover two
/// instances on one server (`tests/it/live.rs`) and the policy table on
/// two instances (`tests/tests/it/examples/policy_on_redis.rs`).
///
/// # Deny cache, leases, fallback
///
/// Every change of the settings (default or override) starts new stores,
/// on the same connection: no cached denial outlives the settings it was
/// made under, and the unspent units of leases taken under the old
/// settings are given back (under the new ones) and never spent after the
/// change. The circuit breaker starts afresh with them.
///
/// The in-memory fallback does not: every version's stores (and the
/// overrides') fall back to one memory store of a [`LiveAlgorithm`] of its
/// own, which follows these settings, so a change carries each key over
/// in memory exactly as a memory store does, after any number of changes
/// (a reload while Redis is away frees nothing). A key checked through an
/// override's store is decided there under that override.
///
/// Settings the scripts cannot decide exactly (see
/// [`RedisStoreBuilder::build`]) are logged (`error`), and the previous
/// ones stay in force for the keys they would have applied to.
pub struct LiveRedis {
    live: LiveAlgorithm,
    /// Builds each version's stores: live keys, the shared connection.
    template: RedisStoreBuilder,
    current: ArcSwap<Version>,
    /// Held while moving to new settings.
    advancing: Mutex<()>,
}

/// The stores of one version of the settings.
struct Version {
    id: u32,
    default: AnyAlgorithm,
    store: RedisStore,
    /// The overrides' stores, by the algorithm's text, built on first use.
    overrides: Mutex<HashMap<String, RedisStore>>,
}

impl LiveRedis {
    /// A builder for a store on `target` (a URL or a [`redis::Client`])
    /// following `live`, with every option of [`RedisStore::builder`]'s
    /// but [`and_limit`](RedisStoreBuilder::and_limit): a live store has
    /// one limit.
    pub fn builder(
        target: impl Into<Target>,
        live: &LiveAlgorithm,
    ) -> RedisStoreBuilder<LiveAlgorithm> {
        RedisStoreBuilder::new(target.into(), live.clone())
    }
}

impl RedisStoreBuilder<LiveAlgorithm> {
    /// The store following the live settings, with their per-key
    /// overrides: see [`LiveRedis`]. Fails as
    /// [`RedisStoreBuilder::build`] does for their current settings.
    pub fn build(self) -> Result<LiveRedis, RedisBuildError> {
        self.check_settings()?;
        let live = self.limit.clone();
        // The version first, then the settings: these are never older (a
        // change between the two is picked up by the next check).
        let (id, _) = live.algorithm_for("");
        let default = live.get();
        let mut template = self.with_limit(default);
        template.live = true;
        template.live_fallback = template.live_memory(default).map(Arc::new);
        let store = template.clone().build()?;
        template.conn = Some(store.conn());
        Ok(LiveRedis {
            live,
            template,
            current: ArcSwap::from_pointee(Version {
                id,
                default,
                store,
                overrides: Mutex::default(),
            }),
            advancing: Mutex::new(()),
        })
    }
}

/// Whether version `a` is after `b` (versions wrap).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl LiveRedis {
    /// The live algorithm it follows (clones share it: a clone changes
    /// this store's settings).
    pub fn live(&self) -> &LiveAlgorithm {
        &self.live
    }

    /// The store deciding `key` now: under the key's override, or the
    /// default. Its checks and refunds carry the key's state over to
    /// these settings first.
    pub fn store_for<K: StableKey + ?Sized>(&self, key: &K) -> RedisStore {
        // The version first, then the settings: these are never older.
        let mut version = self.current.load_full();
        let (id, algorithm) = self.live.algorithm_for(key);
        if after(id, version.id) {
            version = self.advance(id);
        }
        if algorithm == version.default {
            return version.store.clone();
        }
        let text = algorithm.to_string();
        let mut map = version
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = map.get(&text) {
            return store.clone();
        }
        let store = match self.build(algorithm, OVERRIDE_TABLES) {
            Ok(store) => store,
            Err(e) => {
                Self::refused(&algorithm, &e);
                version.store.clone()
            }
        };
        // One per distinct override algorithm (and a few a check that read
        // older settings may add); past that, not kept.
        if map.len() <= MAX_OVERRIDES {
            map.insert(text, store.clone());
        }
        store
    }

    /// Where its decisions come from now (see [`RedisStore::state`]).
    pub fn state(&self) -> crate::StoreState {
        self.current.load().store.state()
    }

    /// How many instances share its limit, as last counted in Redis (see
    /// [`RedisStore::instances`]).
    pub fn instances(&self) -> u64 {
        self.current.load().store.instances()
    }

    /// Gives back every lease's unspent units and runs the fallback's
    /// upkeep (see [`Upkeep::maintain`]); the keys the fallback dropped.
    pub fn maintain(&self, now: u64) -> usize {
        let version = self.current.load();
        let mut dropped = version.store.maintain(now);
        let map = version
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for store in map.values() {
            dropped += store.maintain(now);
        }
        dropped
    }

    /// The in-memory fallback's keys and evictions (see
    /// [`Upkeep::counts`]): one memory, shared by every version's stores.
    pub fn counts(&self) -> Option<StoreCounts> {
        self.current.load().store.counts()
    }

    /// The name of the algorithm the store decides with now.
    pub(crate) fn algorithm_name(&self) -> &'static str {
        ratelimit_core::Algorithm::name(&self.live)
    }

    /// Moves to version `id`: new stores (no deny cache or lease crosses a
    /// change), the old leases' units given back through them. One check
    /// moves, the others wait for it.
    fn advance(&self, id: u32) -> Arc<Version> {
        let _one = self
            .advancing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = self.current.load_full();
        if !after(id, old.id) {
            // Another check moved on first (to this version or a later one).
            return old;
        }
        let default = self.live.get();
        if let Some(memory) = &self.template.live_fallback {
            memory.follow(default);
        }
        let store = match self.build(default, 0) {
            Ok(store) => store,
            Err(e) => {
                Self::refused(&default, &e);
                old.store.clone()
            }
        };
        let new = Arc::new(Version {
            id,
            default,
            store,
            overrides: Mutex::default(),
        });
        self.current.store(Arc::clone(&new));
        if !old.store.is(&new.store) {
            new.store.give_back(take_all(&old));
        }
        new
    }

    /// A store of `algorithm` on the shared connection; `tables`: the
    /// size of its deny cache and lease table (0: the template's).
    fn build(&self, algorithm: AnyAlgorithm, tables: usize) -> Result<RedisStore, RedisBuildError> {
        let mut builder = self.template.clone().with_algorithm(algorithm);
        if tables > 0 {
            builder = builder.deny_cache(tables);
            builder.lease_slots = tables;
        }
        builder.build()
    }

    fn refused(algorithm: &AnyAlgorithm, e: &RedisBuildError) {
        tracing::error!(
            target: "ratelimit_redis",
            algorithm = %algorithm,
            error = %e,
            "live settings not applied in redis; the previous ones stay for the keys they cover"
        );
    }
}

/// The unspent units of every lease of a version's stores.
fn take_all(version: &Version) -> Vec<(Unspent, u64)> {
    let mut all = version.store.take_leases();
    let map = version
        .overrides
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    for store in map.values() {
        all.extend(store.take_leases());
    }
    all
}

impl fmt::Debug for LiveRedis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveRedis")
            .field("live", &self.live)
            .field("store", &self.current.load().store)
            .finish()
    }
}
