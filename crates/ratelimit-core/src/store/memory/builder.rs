//! [`MemoryStoreBuilder`]: a [`MemoryStore`]'s shard count, cap on keys
//! and bans, and the store it builds.

use super::at_capacity::AtCapacity;
use super::store::MemoryStore;
use crate::store::ban::BanPolicy;
use crate::store::deny_cache::Constants;
use crate::store::shard::ShardCell;
use crate::store::shard_lock::Readers;
use crate::{Algorithm, ConfigError};
use hashbrown::DefaultHashBuilder;
use std::marker::PhantomData;

/// Keys at a shard's cap per cell of a row of its sketch of evicted keys
/// (the set of evicted keys in front of it is sized by the same width).
const EVICTED_KEYS_PER_CELL: usize = 1;

/// Default shards per CPU, and the bounds of the default (see
/// [`MemoryStoreBuilder::shards`]).
const SHARDS_PER_CPU: usize = 16;
const MIN_SHARDS: usize = 32;
const MAX_SHARDS: usize = 1024;

/// The least share of a cap on keys a shard gets by default.
const MIN_SHARE: usize = 32;

/// The most shards a store takes.
const MAX_SHARD_COUNT: usize = 1 << 16;

/// The default cap on keys (see [`MemoryStoreBuilder::max_keys`]).
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The default shard count (see [`MemoryStoreBuilder::shards`]), a power
/// of two.
fn default_shards(max_keys: Option<usize>) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = (cpus * SHARDS_PER_CPU)
        .clamp(MIN_SHARDS, MAX_SHARDS)
        .next_power_of_two();
    match max_keys {
        Some(m) => shards.min(1 << (m / MIN_SHARE).max(1).ilog2()),
        None => shards,
    }
}

/// Builds a [`MemoryStore`] with a shard count or a cap on keys. The key
/// type `K` is the store's, usually inferred from where the store is used.
///
/// ```
/// use ratelimit_core::store::AtCapacity;
/// use ratelimit_core::{Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::builder(Gcra::new(10, Duration::from_secs(1)).unwrap())
///     .max_keys(Some(100_000))
///     .at_capacity(AtCapacity::Evict)
///     .build()
///     .unwrap();
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder<A, K> {
    algorithm: A,
    /// `None`: the default (see [`MemoryStoreBuilder::shards`]).
    shards: Option<usize>,
    max_keys: Option<usize>,
    at_capacity: AtCapacity,
    deny_cache: bool,
    promote_always: bool,
    ban: Option<BanPolicy>,
    key: PhantomData<fn() -> K>,
}

impl<A: Algorithm, K> MemoryStoreBuilder<A, K> {
    /// The number of shards, rounded up to a power of two (1 to 65,536,
    /// else [`build`](Self::build) fails naming the value; with a cap on
    /// keys, at most the cap).
    ///
    /// The default is 16 per CPU, at least 32 and at most 1,024. Two
    /// threads whose keys fall in one shard at once take turns, and while
    /// one waits the shard's line moves between their cores more than
    /// once: more shards make that rarer, while a thread alone gains
    /// nothing from them and caches more of their lines
    /// (BENCHMARKS.md, "Keyed check", weighs the two). Each shard costs
    /// 1,184 bytes (its cell and its readers' counts) whether or not it
    /// holds keys; a store of few keys can take fewer.
    ///
    /// With a cap on keys ([`max_keys`](Self::max_keys)), the default is
    /// also at most one shard per 32 keys of the cap (rounded down to a
    /// power of two): each shard's share of the cap is then at least 32
    /// keys, so shards that fill before the others (keys do not spread
    /// exactly evenly) evict while the store is still nearly as full as
    /// its cap, and the sketch of evicted keys keeps its one cell a row
    /// per capped key.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// A hard cap on the number of keys with state: by default
    /// [`DEFAULT_MAX_KEYS`] (1,000,000), and `None` for no cap (memory
    /// then grows with the keys clients send). The cap is split evenly
    /// over the shards, rounded down (a store with a cap has no more
    /// shards than the cap), so the store never holds more than
    /// `max_keys` keys. `Some(0)` fails at [`build`](Self::build).
    pub fn max_keys(mut self, max_keys: Option<usize>) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What happens to a new key at the cap (default: evict).
    pub fn at_capacity(mut self, at_capacity: AtCapacity) -> Self {
        self.at_capacity = at_capacity;
        self
    }

    /// Whether denied keys are answered from the lock-free slots (default
    /// on; decisions are the same either way).
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = on;
        self
    }

    /// Bans a key when its limit denies it with nothing left (`remaining`
    /// 0, and a `wait`: not a request that can never fit; default: no
    /// ban): every check
    /// of it is then denied until the ban ends, whatever the algorithm
    /// says (see [`BanPolicy`]). Bans live in each shard, at most the
    /// shard's share of [`max_keys`](Self::max_keys) of them.
    pub fn ban(mut self, ban: Option<BanPolicy>) -> Self {
        self.ban = ban;
        self
    }

    /// For tests of the hot slot: a key's state moves there on its second
    /// check in a row, whether or not the shard's lock was contended
    /// (decisions are the same either way).
    #[doc(hidden)]
    pub fn promote_always(mut self, on: bool) -> Self {
        self.promote_always = on;
        self
    }

    /// The store; fails on a cap of 0 keys or a shard count out of
    /// range, naming the setting and its value.
    pub fn build(self) -> Result<MemoryStore<A, K>, ConfigError> {
        if self.max_keys == Some(0) {
            return Err(ConfigError::BadSetting(
                "max_keys Some(0): a cap holds at least 1 key (None: no cap)".into(),
            ));
        }
        if let Some(n) = self.shards.filter(|n| !(1..=MAX_SHARD_COUNT).contains(n)) {
            return Err(ConfigError::BadSetting(format!(
                "shards {n}: from 1 to {MAX_SHARD_COUNT}"
            )));
        }
        Ok(self.build_valid())
    }

    /// The store of settings [`build`](Self::build) checked.
    fn build_valid(self) -> MemoryStore<A, K> {
        let mut shards = match self.shards {
            Some(shards) => shards.next_power_of_two(),
            None => default_shards(self.max_keys),
        };
        if let Some(m) = self.max_keys {
            // No more shards than keys, so that the shares add up to at
            // most the cap.
            let fit = 1usize << m.max(1).ilog2();
            shards = shards.min(fit);
        }
        let bits = shards.trailing_zeros();
        let shard_cap = self.max_keys.map_or(usize::MAX, |m| (m / shards).max(1));
        let deny_cache = self.deny_cache && self.algorithm.caches_denials();
        let readers = Readers::new(shards);
        let shards = (0..shards)
            .map(|_| ShardCell::new(self.algorithm.fresh(&(), 0)))
            .collect();
        let read_denials = self.ban.is_none() && self.algorithm.denies_read_only();
        MemoryStore {
            read_denials,
            readers,
            half_horizon: self.algorithm.idle_horizon() / 2,
            constants: Constants {
                limit: self.algorithm.limit(),
                window: self.algorithm.window(),
            },
            algorithm: self.algorithm,
            shards,
            hasher: DefaultHashBuilder::default(),
            // The top 7 bits feed hashbrown's tags; take the shard from the
            // bits below them.
            shard_shift: 57 - bits,
            shard_cap,
            max_keys: self.max_keys,
            at_capacity: self.at_capacity,
            deny_cache,
            promote_always: self.promote_always,
            evicted_width: (shard_cap / EVICTED_KEYS_PER_CELL).clamp(16, 1 << 20),
            ban: self.ban.map(Box::new),
        }
    }
}

impl<A: Algorithm, K> MemoryStore<A, K> {
    /// A store for `algorithm`, with the default shard count and the
    /// default cap on keys ([`DEFAULT_MAX_KEYS`]; the
    /// [`builder`](Self::builder) sets another, or none).
    pub fn new(algorithm: A) -> Self {
        Self::builder(algorithm).build_valid()
    }

    /// A builder, to set the shard count or a cap on keys.
    pub fn builder(algorithm: A) -> MemoryStoreBuilder<A, K> {
        MemoryStoreBuilder {
            algorithm,
            shards: None,
            max_keys: Some(DEFAULT_MAX_KEYS),
            at_capacity: AtCapacity::Evict,
            deny_cache: true,
            promote_always: false,
            ban: None,
            key: PhantomData,
        }
    }
}
