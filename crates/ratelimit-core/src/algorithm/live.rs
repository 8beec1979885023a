//! An algorithm whose settings change while it runs, keeping each key's
//! used quota.

use super::carry::{carry, charged, fresh, used, widen};
use super::{stable_hash, Algorithm, AnyState, StableKey};
use crate::AnyAlgorithm;
use crate::Decision;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The most per-key overrides a [`LiveAlgorithm`] holds.
pub const MAX_OVERRIDES: usize = 1024;

/// Why a change to a [`LiveAlgorithm`] was refused.
///
/// ```
/// use ratelimit_core::algorithm::{LiveError, MAX_OVERRIDES};
/// use ratelimit_core::{Gcra, LiveAlgorithm};
/// use std::time::Duration;
///
/// let gcra = Gcra::new(10, Duration::from_secs(1)).unwrap();
/// let live = LiveAlgorithm::new(gcra);
/// for key in 0..MAX_OVERRIDES as u64 {
///     live.set_override(&key, gcra).unwrap();
/// }
/// let refused = live.set_override(&u64::MAX, gcra);
/// assert_eq!(refused, Err(LiveError::TooManyOverrides { max: MAX_OVERRIDES }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveError {
    /// Adding one more override would pass [`MAX_OVERRIDES`].
    TooManyOverrides {
        /// The bound.
        max: usize,
    },
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyOverrides { max } => {
                write!(f, "too many per-key overrides (at most {max})")
            }
        }
    }
}

impl std::error::Error for LiveError {}

/// One version of the settings: the default and the per-key overrides
/// (by the key's [`stable_hash`]). Every state holds the version it was
/// last written under, so it carries over from it after any number of
/// changes; a version lives as long as a state or the handle holds it.
#[derive(Debug, PartialEq, Eq)]
struct Version {
    id: u32,
    default: AnyAlgorithm,
    overrides: Arc<HashMap<u64, AnyAlgorithm>>,
}

impl Version {
    fn for_key(&self, hash: u64) -> &AnyAlgorithm {
        self.overrides.get(&hash).unwrap_or(&self.default)
    }

    /// The next version, or `None` when these settings are already in
    /// force (a change that changes nothing makes no version).
    fn next(
        &self,
        default: AnyAlgorithm,
        overrides: Arc<HashMap<u64, AnyAlgorithm>>,
    ) -> Option<Arc<Self>> {
        if default == self.default && overrides == self.overrides {
            return None;
        }
        Some(Arc::new(Self {
            id: self.id.wrapping_add(1),
            default,
            overrides,
        }))
    }
}

/// The state of a key of a [`LiveAlgorithm`]: the settings it was last
/// written under (shared, not copied), the key's [`stable_hash`] (for its
/// override), and the state itself.
///
/// ```
/// use ratelimit_core::{Algorithm, Gcra, LiveAlgorithm};
/// use std::time::Duration;
///
/// let live = LiveAlgorithm::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// let mut state = live.fresh("key", 0); // a LiveState
/// assert!(live.check(&mut state, 1, 0).allowed);
/// assert!(!live.check(&mut state, 1, 0).allowed);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LiveState {
    version: Arc<Version>,
    hash: u64,
    state: AnyState,
}

impl fmt::Debug for LiveState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveState")
            .field("version", &self.version.id)
            .field("hash", &self.hash)
            .field("state", &self.state)
            .finish()
    }
}

/// An [`AnyAlgorithm`] whose settings can be changed while a store uses
/// it, with per-key overrides; clones share the settings, so a clone is
/// the handle that changes them.
///
/// ```
/// use ratelimit_core::{AnyAlgorithm, LiveAlgorithm, MemoryStore, Store};
///
/// let spec = |s: &str| s.parse::<AnyAlgorithm>().unwrap();
/// let live = LiveAlgorithm::new(spec("gcra 3/1h"));
/// let store = MemoryStore::new(live.clone());
/// store.check("k", 2, 0).value().unwrap();
/// live.set(spec("gcra 4/1h"));
/// assert_eq!(store.check("k", 0, 0).value().unwrap().remaining, 2);
/// // Lowered and raised again: the 2 used are still used.
/// live.set(spec("gcra 1/1h"));
/// live.set(spec("gcra 4/1h"));
/// assert_eq!(store.check("k", 0, 0).value().unwrap().remaining, 2);
/// # let _: &MemoryStore<LiveAlgorithm, String> = &store;
/// ```
///
/// Every check reads the settings once (one atomic pointer load), so each
/// decision is made wholly under one version: no decision mixes two. A
/// key's state holds the version it was last written under, and the first
/// check after a change carries it over, in the store's lock. **A change
/// frees nothing**: what a key has used stays used under the new
/// settings, which free it at their own pace. What each kind carries
/// over to each other, and the bound that follows, are the contract's
/// [Live settings: carry-over](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md#live-settings-carry-over).
///
/// A change that changes nothing makes no version. A key untouched
/// through any number of changes still carries over from the version it
/// holds. Overrides are keyed by the key's [`stable_hash`] (for the HTTP
/// layer's keys, the hash of the key's text), at most [`MAX_OVERRIDES`].
///
/// A key's state is 56 bytes (plus a sliding log's entries), against 8 to
/// 24 for a fixed algorithm: the price of changing settings in place.
///
/// A store of a live algorithm must not cache denials (a change may admit
/// a denied key at once): [`MemoryStore`](crate::MemoryStore) turns its
/// deny cache off for it ([`Algorithm::caches_denials`]). GCRA and the
/// buckets are kept in their 16-byte state, so that no state wraps in a
/// lifetime ([`idle_horizon`](Algorithm::idle_horizon) is `u64::MAX`).
#[derive(Clone)]
pub struct LiveAlgorithm {
    current: Arc<ArcSwap<Version>>,
}

impl fmt::Debug for LiveAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.current.load();
        f.debug_struct("LiveAlgorithm")
            .field("algorithm", &v.default)
            .field("overrides", &v.overrides.len())
            .finish()
    }
}

impl LiveAlgorithm {
    /// Starts with `algorithm` and no overrides.
    pub fn new(algorithm: impl Into<AnyAlgorithm>) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(Version {
                id: 0,
                default: widen(algorithm.into()),
                overrides: Arc::default(),
            })),
        }
    }

    /// The current default algorithm.
    pub fn get(&self) -> AnyAlgorithm {
        self.current.load().default
    }

    /// The current override of `key`, if any.
    pub fn override_of<K: StableKey + ?Sized>(&self, key: &K) -> Option<AnyAlgorithm> {
        let hash = stable_hash(key);
        self.current.load().overrides.get(&hash).copied()
    }

    /// The version of the settings (a number that changes with every
    /// change that changes something, wrapping) and the algorithm `key`
    /// follows under it (its override, or the default), read together:
    /// for a store that decides elsewhere under the same settings
    /// (`ratelimit-redis`).
    pub fn algorithm_for<K: StableKey + ?Sized>(&self, key: &K) -> (u32, AnyAlgorithm) {
        let current = self.current.load();
        (current.id, *current.for_key(stable_hash(key)))
    }

    /// The number of overrides.
    pub fn overrides(&self) -> usize {
        self.current.load().overrides.len()
    }

    /// Replaces the default algorithm (keys with an override keep theirs).
    /// Checks already deciding finish under the old settings; every later
    /// check uses the new ones. Setting the algorithm in force changes
    /// nothing.
    pub fn set(&self, algorithm: impl Into<AnyAlgorithm>) {
        let algorithm = widen(algorithm.into());
        self.advance(|v| v.next(algorithm, Arc::clone(&v.overrides)));
    }

    /// Gives `key` its own algorithm (a customer with 10 times the quota);
    /// fails past [`MAX_OVERRIDES`]. Giving it the override it has changes
    /// nothing.
    pub fn set_override<K: StableKey + ?Sized>(
        &self,
        key: &K,
        algorithm: impl Into<AnyAlgorithm>,
    ) -> Result<(), LiveError> {
        let (hash, algorithm) = (stable_hash(key), widen(algorithm.into()));
        let mut refused = false;
        self.advance(|v| {
            let overrides = &v.overrides;
            refused = !overrides.contains_key(&hash) && overrides.len() >= MAX_OVERRIDES;
            if refused || overrides.get(&hash) == Some(&algorithm) {
                return None;
            }
            let mut map = HashMap::clone(overrides);
            map.insert(hash, algorithm);
            v.next(v.default, Arc::new(map))
        });
        if refused {
            Err(LiveError::TooManyOverrides { max: MAX_OVERRIDES })
        } else {
            Ok(())
        }
    }

    /// Takes `key`'s override away (it then follows the default); returns
    /// whether it had one.
    pub fn remove_override<K: StableKey + ?Sized>(&self, key: &K) -> bool {
        let hash = stable_hash(key);
        let mut had = false;
        self.advance(|v| {
            had = v.overrides.contains_key(&hash);
            if !had {
                return None;
            }
            let mut map = HashMap::clone(&v.overrides);
            map.remove(&hash);
            v.next(v.default, Arc::new(map))
        });
        had
    }

    /// Replaces the default and every override at once (a reload). The
    /// settings in force again (an unchanged file) change nothing.
    pub fn replace<K: StableKey + ?Sized>(
        &self,
        default: impl Into<AnyAlgorithm>,
        overrides: &[(&K, AnyAlgorithm)],
    ) -> Result<(), LiveError> {
        if overrides.len() > MAX_OVERRIDES {
            return Err(LiveError::TooManyOverrides { max: MAX_OVERRIDES });
        }
        let map: HashMap<u64, AnyAlgorithm> = overrides
            .iter()
            .map(|(k, a)| (stable_hash(*k), widen(*a)))
            .collect();
        let (default, map) = (widen(default.into()), Arc::new(map));
        self.advance(|v| v.next(default, Arc::clone(&map)));
        Ok(())
    }

    /// Moves to the version `change` makes of the current one, if it
    /// makes one (`None`: nothing changes).
    fn advance(&self, mut change: impl FnMut(&Version) -> Option<Arc<Version>>) {
        self.current
            .rcu(|v| change(v).unwrap_or_else(|| Arc::clone(v)));
    }
}

impl Algorithm for LiveAlgorithm {
    type State = LiveState;

    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> LiveState {
        let version = self.current.load_full();
        let hash = stable_hash(key);
        let state = fresh(version.for_key(hash), hash, now);
        LiveState {
            version,
            hash,
            state,
        }
    }

    /// Past the key's limit too, when a change left it over.
    fn used(&self, state: &mut LiveState, now: u64) -> u64 {
        let current = self.current.load();
        let algorithm = up_to_date(&current, state, now);
        used(algorithm, state.state.clone(), now)
    }

    /// `used` charged at `now` under the key's settings, past its limit if
    /// so (as a change carries an overshoot).
    fn restore<K: StableKey + ?Sized>(&self, key: &K, used: u64, now: u64) -> LiveState {
        let version = self.current.load_full();
        let hash = stable_hash(key);
        let state = charged(version.for_key(hash), hash, used, now);
        LiveState {
            version,
            hash,
            state,
        }
    }

    fn check(&self, state: &mut LiveState, cost: u64, now: u64) -> Decision {
        let current = self.current.load();
        up_to_date(&current, state, now).check(&mut state.state, cost, now)
    }

    fn charge(&self, state: &mut LiveState, cost: u64, now: u64) -> Decision {
        let current = self.current.load();
        up_to_date(&current, state, now).charge(&mut state.state, cost, now)
    }

    fn refund(&self, state: &mut LiveState, cost: u64, admitted_at: u64, now: u64) {
        let current = self.current.load();
        up_to_date(&current, state, now).refund(&mut state.state, cost, admitted_at, now);
    }

    fn is_full(&self, state: &LiveState, now: u64) -> bool {
        // Judged by the settings it was written under.
        state.version.for_key(state.hash).is_full(&state.state, now)
    }

    fn idle_horizon(&self) -> u64 {
        u64::MAX
    }

    fn caches_denials(&self) -> bool {
        false
    }

    fn limit(&self) -> u64 {
        self.get().limit()
    }

    fn window(&self) -> Duration {
        self.get().window()
    }

    fn name(&self) -> &'static str {
        self.get().name()
    }
}

/// Brings `state` to `current` (carrying it over from the version it
/// holds, see [`LiveAlgorithm`]); returns the key's algorithm under it.
/// Up to date, that is one pointer comparison.
#[inline]
fn up_to_date<'a>(current: &'a Arc<Version>, state: &mut LiveState, now: u64) -> &'a AnyAlgorithm {
    let algorithm = current.for_key(state.hash);
    if !Arc::ptr_eq(&state.version, current) {
        let old = std::mem::replace(&mut state.state, AnyState::Scaled(0));
        let from = state.version.for_key(state.hash);
        state.state = carry(from, algorithm, old, state.hash, now);
        state.version = Arc::clone(current);
    }
    algorithm
}
