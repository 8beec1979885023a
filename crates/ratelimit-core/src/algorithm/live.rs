//! An algorithm whose settings change while it runs, keeping each key's
//! used quota.

use super::{
    stable_hash, Algorithm, AnyAlgorithm, AnyGcra, AnyLeakyBucket, AnyState, AnyTokenBucket, Gcra,
    LeakyBucket, StableKey, TokenBucket,
};
use crate::Decision;
use arc_swap::ArcSwap;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The most per-key overrides a [`LiveAlgorithm`] holds.
pub const MAX_OVERRIDES: usize = 1024;
/// How many past versions of the settings are remembered, so that a key
/// untouched through that many changes still carries its quota over.
const HISTORY: usize = 64;

/// Why a change to a [`LiveAlgorithm`] was refused.
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
/// (by the key's [`stable_hash`]).
#[derive(Debug, Clone)]
struct Version {
    id: u32,
    default: AnyAlgorithm,
    overrides: Arc<HashMap<u64, AnyAlgorithm>>,
}

impl Version {
    fn for_key(&self, hash: u64) -> &AnyAlgorithm {
        self.overrides.get(&hash).unwrap_or(&self.default)
    }
}

/// What a check reads, in one atomic load: the current version and the
/// recent past ones.
#[derive(Debug)]
struct Snapshot {
    current: Version,
    past: VecDeque<Version>,
}

impl Snapshot {
    fn version(&self, id: u32) -> Option<&Version> {
        if self.current.id == id {
            return Some(&self.current);
        }
        self.past.iter().find(|v| v.id == id)
    }

    fn next(&self, default: AnyAlgorithm, overrides: Arc<HashMap<u64, AnyAlgorithm>>) -> Self {
        let mut past = self.past.clone();
        past.push_front(self.current.clone());
        past.truncate(HISTORY);
        Self {
            current: Version {
                id: self.current.id.wrapping_add(1),
                default,
                overrides,
            },
            past,
        }
    }
}

/// The state of a key of a [`LiveAlgorithm`]: the version of the settings
/// it was last written under, the key's [`stable_hash`] (for its
/// override), and the state itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveState {
    version: u32,
    hash: u64,
    state: AnyState,
}

/// An [`AnyAlgorithm`] whose settings can be changed while a store uses
/// it, with per-key overrides; clones share the settings, so a clone is
/// the handle that changes them.
///
/// Every check reads the settings once (one atomic pointer load of an
/// immutable snapshot), so each decision is made wholly under one version:
/// no decision mixes two. A key's state remembers the version it was last
/// written under, and the first check after a change carries it over, in
/// the store's lock, so a client keeps the quota it has used:
///
/// | old and new kind | what carries over |
/// |---|---|
/// | gcra or token-bucket, to either | the quota used, in requests: the TAT is rescaled to the new `T` (rounded up) and capped at the new burst, so 2 used of a new 4 leaves 2 |
/// | leaky-bucket | the queue's length, in requests, capped at the new queue |
/// | fixed-window | the count of the window open now, capped at the new limit, in the new window holding now (a first-request window keeps its start) |
/// | sliding-log | the entries still within the new period; over the new limit, the oldest cost is dropped down to it |
/// | sliding-window | the same period: both counts, capped at the new limit; another: the old estimate now, as the new window's count |
/// | any other change of kind | nothing: the key starts full |
///
/// The past 64 versions are remembered; a key untouched
/// through more changes than that starts full. Overrides are keyed by the
/// key's [`stable_hash`] (for the HTTP layer's keys, the hash of the key's
/// text), at most [`MAX_OVERRIDES`].
///
/// A key's state is 56 bytes (plus a sliding log's entries), against 8 to
/// 24 for a fixed algorithm: the price of changing settings in place.
///
/// A store of a live algorithm must not cache denials (a change may admit
/// a denied key at once): [`MemoryStore`](crate::MemoryStore) turns its
/// deny cache off for it ([`Algorithm::caches_denials`]). GCRA and the
/// buckets are kept in their 16-byte state, so that no state wraps in a
/// lifetime ([`idle_horizon`](Algorithm::idle_horizon) is `u64::MAX`).
///
/// ```
/// use ratelimit_core::{AnyAlgorithm, LiveAlgorithm, MemoryStore};
///
/// let live = LiveAlgorithm::new("gcra 3/1h".parse::<AnyAlgorithm>().unwrap());
/// let store = MemoryStore::new(live.clone());
/// store.check_sync("k", 2, 0).unwrap();
/// live.set("gcra 4/1h".parse::<AnyAlgorithm>().unwrap());
/// assert_eq!(store.check_sync("k", 0, 0).unwrap().remaining, 2);
/// # let _: &MemoryStore<LiveAlgorithm, String> = &store;
/// ```
#[derive(Clone)]
pub struct LiveAlgorithm {
    snapshot: Arc<ArcSwap<Snapshot>>,
}

impl fmt::Debug for LiveAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.snapshot.load();
        f.debug_struct("LiveAlgorithm")
            .field("algorithm", &s.current.default)
            .field("overrides", &s.current.overrides.len())
            .finish()
    }
}

/// `a` in the 16-byte state, where it has one.
fn widen(a: AnyAlgorithm) -> AnyAlgorithm {
    let wide = match a {
        AnyAlgorithm::Gcra(AnyGcra::Narrow(g)) => {
            Gcra::with_burst_wide(g.rate_limit(), g.period(), g.burst()).map(Into::into)
        }
        AnyAlgorithm::TokenBucket(t) if !t.is_wide() => {
            TokenBucket::new_wide(t.capacity(), t.refill(), t.period()).map(Into::into)
        }
        AnyAlgorithm::LeakyBucket(AnyLeakyBucket::Narrow(l)) => {
            LeakyBucket::new_wide(l.rate_limit(), l.period(), l.queue()).map(Into::into)
        }
        other => Ok(other),
    };
    wide.unwrap_or(a)
}

/// The GCRA of a GCRA or a token bucket, in the 16-byte state.
fn wide_gcra(a: &AnyAlgorithm) -> Option<&Gcra<u128>> {
    match a {
        AnyAlgorithm::Gcra(AnyGcra::Wide(g))
        | AnyAlgorithm::TokenBucket(AnyTokenBucket {
            gcra: AnyGcra::Wide(g),
        }) => Some(g),
        _ => None,
    }
}

/// `used` scaled units of a step `from` in units of a step `to`, rounded
/// up (a client never gains quota by a change).
fn rescale(used: u128, from: u128, to: u128) -> u128 {
    match used.checked_mul(to) {
        Some(p) => p.div_ceil(from),
        None => used.div_ceil(from).saturating_mul(to),
    }
}

/// A fresh state of `a` for the key hashed `hash`.
fn fresh(a: &AnyAlgorithm, hash: u64, now: u64) -> AnyState {
    match a {
        AnyAlgorithm::FixedWindow(w) => AnyState::Window(w.fresh_hashed(hash, now)),
        other => other.fresh(&(), now),
    }
}

/// `state`, written under `old`, as a state of `new` at `now` (see
/// [`LiveAlgorithm`]'s table).
fn carry(old: &AnyAlgorithm, new: &AnyAlgorithm, state: AnyState, hash: u64, now: u64) -> AnyState {
    use AnyAlgorithm as A;
    if old == new {
        return state;
    }
    if let (Some(o), Some(n), AnyState::Wide(s)) = (wide_gcra(old), wide_gcra(new), &state) {
        let (used, step) = o.used(s, now);
        return AnyState::Wide(n.with_used(rescale(used, step, n.step()), now));
    }
    match (old, new, state) {
        (
            A::LeakyBucket(AnyLeakyBucket::Wide(o)),
            A::LeakyBucket(AnyLeakyBucket::Wide(n)),
            AnyState::Wide(s),
        ) => {
            let (used, step) = o.used(&s, now);
            AnyState::Wide(n.with_used(rescale(used, step, n.step()), now))
        }
        (A::FixedWindow(o), A::FixedWindow(n), AnyState::Window(s)) => {
            AnyState::Window(n.carry_from(o, s, hash, now))
        }
        (A::SlidingLog(_), A::SlidingLog(n), AnyState::Log(s)) => AnyState::Log(n.carry(s, now)),
        (A::SlidingWindow(o), A::SlidingWindow(n), AnyState::Sliding(s)) => {
            AnyState::Sliding(n.carry_from(o, s, now))
        }
        _ => fresh(new, hash, now),
    }
}

impl LiveAlgorithm {
    /// Starts with `algorithm` and no overrides.
    pub fn new(algorithm: impl Into<AnyAlgorithm>) -> Self {
        Self {
            snapshot: Arc::new(ArcSwap::from_pointee(Snapshot {
                current: Version {
                    id: 0,
                    default: widen(algorithm.into()),
                    overrides: Arc::default(),
                },
                past: VecDeque::new(),
            })),
        }
    }

    /// The current default algorithm.
    pub fn get(&self) -> AnyAlgorithm {
        self.snapshot.load().current.default
    }

    /// The current override of `key`, if any.
    pub fn override_of<K: StableKey + ?Sized>(&self, key: &K) -> Option<AnyAlgorithm> {
        let hash = stable_hash(key);
        self.snapshot.load().current.overrides.get(&hash).copied()
    }

    /// The version of the settings (a number that changes with every
    /// change, wrapping) and the algorithm `key` follows under it (its
    /// override, or the default), read together: for a store that decides
    /// elsewhere under the same settings (`ratelimit-redis`).
    pub fn algorithm_for<K: StableKey + ?Sized>(&self, key: &K) -> (u32, AnyAlgorithm) {
        let snapshot = self.snapshot.load();
        let current = &snapshot.current;
        (current.id, *current.for_key(stable_hash(key)))
    }

    /// The number of overrides.
    pub fn overrides(&self) -> usize {
        self.snapshot.load().current.overrides.len()
    }

    /// Replaces the default algorithm (keys with an override keep theirs).
    /// Checks already deciding finish under the old settings; every later
    /// check uses the new ones.
    pub fn set(&self, algorithm: impl Into<AnyAlgorithm>) {
        let algorithm = widen(algorithm.into());
        self.snapshot
            .rcu(|s| s.next(algorithm, Arc::clone(&s.current.overrides)));
    }

    /// Gives `key` its own algorithm (a customer with 10 times the quota);
    /// fails past [`MAX_OVERRIDES`].
    pub fn set_override<K: StableKey + ?Sized>(
        &self,
        key: &K,
        algorithm: impl Into<AnyAlgorithm>,
    ) -> Result<(), LiveError> {
        let (hash, algorithm) = (stable_hash(key), widen(algorithm.into()));
        let mut refused = false;
        self.snapshot.rcu(|s| {
            let overrides = &s.current.overrides;
            refused = !overrides.contains_key(&hash) && overrides.len() >= MAX_OVERRIDES;
            if refused {
                return Arc::clone(s);
            }
            let mut map = HashMap::clone(overrides);
            map.insert(hash, algorithm);
            Arc::new(s.next(s.current.default, Arc::new(map)))
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
        self.snapshot.rcu(|s| {
            had = s.current.overrides.contains_key(&hash);
            if !had {
                return Arc::clone(s);
            }
            let mut map = HashMap::clone(&s.current.overrides);
            map.remove(&hash);
            Arc::new(s.next(s.current.default, Arc::new(map)))
        });
        had
    }

    /// Replaces the default and every override at once (a reload).
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
        self.snapshot.rcu(|s| s.next(default, Arc::clone(&map)));
        Ok(())
    }

    /// Brings `state` to the current version; returns it with its
    /// algorithm.
    fn current<'a>(snapshot: &'a Snapshot, state: &mut LiveState, now: u64) -> &'a AnyAlgorithm {
        let current = &snapshot.current;
        let algorithm = current.for_key(state.hash);
        if state.version != current.id {
            let old = std::mem::replace(&mut state.state, AnyState::Scaled(0));
            state.state = match snapshot.version(state.version) {
                Some(v) => carry(v.for_key(state.hash), algorithm, old, state.hash, now),
                None => fresh(algorithm, state.hash, now),
            };
            state.version = current.id;
        }
        algorithm
    }
}

impl Algorithm for LiveAlgorithm {
    type State = LiveState;

    fn fresh<K: StableKey + ?Sized>(&self, key: &K, now: u64) -> LiveState {
        let snapshot = self.snapshot.load();
        let hash = stable_hash(key);
        LiveState {
            version: snapshot.current.id,
            hash,
            state: fresh(snapshot.current.for_key(hash), hash, now),
        }
    }

    fn check(&self, state: &mut LiveState, cost: u64, now: u64) -> Decision {
        let snapshot = self.snapshot.load();
        Self::current(&snapshot, state, now).check(&mut state.state, cost, now)
    }

    fn refund(&self, state: &mut LiveState, cost: u64, admitted_at: u64, now: u64) {
        let snapshot = self.snapshot.load();
        Self::current(&snapshot, state, now).refund(&mut state.state, cost, admitted_at, now);
    }

    fn is_full(&self, state: &LiveState, now: u64) -> bool {
        let snapshot = self.snapshot.load();
        // Judged by the settings it was written under; a state older than
        // the remembered versions would start full anyway.
        match snapshot.version(state.version) {
            Some(v) => v.for_key(state.hash).is_full(&state.state, now),
            None => true,
        }
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
