//! The failure policy: what a call Redis did not decide gets (the
//! in-memory fallback's answer, or an error), and the throttled report of
//! the failure.

use crate::fleet::roster::Roster;
use crate::outage::failure::{Failure, Kind};
#[cfg(feature = "live")]
use crate::outage::live_fallback::LiveMemory;
use crate::outage::log_throttle::{LogThrottle, LOG_EVERY};
use crate::outage::share::Share;
use crate::scripts::combine::{combine, settled};
use ratelimit_core::store::StoreCounts;
use ratelimit_core::{
    Algorithm, Answer, AnyAlgorithm, BanPolicy, Decision, MemoryStore, Store, StoreError,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The most bans told by other instances kept until the fallback's next
/// use.
const MAX_PENDING: usize = 1_024;

/// The in-memory fallback, one memory store per limit (or, for a live
/// store, the memory every version shares). Calls reach it out of order
/// (one after a timeout, the next at once); the memory store decides a
/// call whose time is older than its latest at that latest time, so a
/// key's time never goes back.
pub(crate) struct Fallback {
    memory: Memory,
    /// The instances sharing the limits, whose count divides them (see
    /// [`Share`]); none: the whole limits.
    roster: Option<Arc<Roster>>,
    /// Makes a check of several limits all or nothing.
    lock: Mutex<()>,
    /// Bans told by other instances (pub/sub), each with the instant it
    /// ends: applied at the fallback's next check or settlement, when the
    /// caller's clock the memory stores count on is at hand.
    pending: Mutex<Vec<(String, tokio::time::Instant)>>,
    /// Whether `pending` may hold one (read on every use, nothing else).
    any_pending: AtomicBool,
}

/// A memory store of one limit.
type FixedStore = MemoryStore<AnyAlgorithm, String>;
/// A live store's memory.
#[cfg(feature = "live")]
type LiveStore = MemoryStore<ratelimit_core::LiveAlgorithm, String>;

/// Where the fallback counts.
enum Memory {
    /// A memory store per limit, of this store's own.
    Fixed(Vec<FixedStore>),
    /// A live store's memory, shared by its versions and overrides: this
    /// store decides its keys there under `algorithm`.
    #[cfg(feature = "live")]
    Live {
        algorithm: AnyAlgorithm,
        shared: Arc<LiveMemory>,
    },
}

impl Fallback {
    /// One memory store per algorithm, each of at most `max_keys` keys,
    /// banning as `ban` says.
    pub(crate) fn new<'a>(
        algorithms: impl Iterator<Item = &'a AnyAlgorithm>,
        max_keys: usize,
        ban: Option<BanPolicy>,
    ) -> Self {
        Self::on(Memory::Fixed(
            algorithms
                .map(|&algorithm| {
                    MemoryStore::<AnyAlgorithm, String>::builder(algorithm)
                        .max_keys(Some(max_keys))
                        .ban(ban)
                        .build()
                        .expect("a cap of at least 1 key (checked by the store's build)")
                })
                .collect(),
        ))
    }

    /// A live store's fallback: its keys decided under `algorithm` in the
    /// memory every version of the store shares.
    #[cfg(feature = "live")]
    pub(crate) fn live(algorithm: AnyAlgorithm, shared: Arc<LiveMemory>) -> Self {
        Self::on(Memory::Live { algorithm, shared })
    }

    /// The same fallback admitting its share of the limits among the
    /// instances `roster` counts.
    pub(crate) fn shared_by(mut self, roster: Option<Arc<Roster>>) -> Self {
        self.roster = roster;
        self
    }

    /// This instance's share of the limits now.
    fn share(&self) -> Share {
        Share::new(self.roster.as_ref().map_or(1, |r| r.instances()))
    }

    fn on(memory: Memory) -> Self {
        Self {
            memory,
            roster: None,
            lock: Mutex::new(()),
            pending: Mutex::default(),
            any_pending: AtomicBool::new(false),
        }
    }

    /// Bans `key` for `duration` from now, as another instance did: at
    /// the next check or settlement (the caller's clock is not at hand
    /// here). At most [`MAX_PENDING`] wait; past that, the one told first
    /// is dropped (Redis still holds the ban).
    pub(crate) fn ban_later(&self, key: &str, duration: Duration) {
        let until = tokio::time::Instant::now() + duration;
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|(k, _)| k != key);
        if pending.len() >= MAX_PENDING {
            pending.remove(0);
        }
        pending.push((key.to_owned(), until));
        self.any_pending.store(true, Ordering::Release);
    }

    /// Applies the bans told by other instances, at the caller's `now`.
    fn apply_pending(&self, now: u64) {
        if !self.any_pending.load(Ordering::Acquire) {
            return;
        }
        let told = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            self.any_pending.store(false, Ordering::Release);
            std::mem::take(&mut *pending)
        };
        let at = tokio::time::Instant::now();
        for (key, until) in told {
            let left = until.saturating_duration_since(at);
            if !left.is_zero() {
                self.ban(&key, left, now);
            }
        }
    }

    /// A live store's memory with `key` under this store's settings, and
    /// their capacity; `None` for a fallback of its own.
    #[cfg(feature = "live")]
    fn live_for(&self, key: &str) -> Option<(&LiveStore, u64)> {
        match &self.memory {
            Memory::Live { algorithm, shared } => {
                Some((shared.with(key, algorithm), algorithm.limit()))
            }
            Memory::Fixed(_) => None,
        }
    }

    /// The memory stores of a fallback of its own, one per limit (none
    /// for a live store's).
    fn fixed(&self) -> &[FixedStore] {
        match &self.memory {
            Memory::Fixed(memory) => memory,
            #[cfg(feature = "live")]
            Memory::Live { .. } => &[],
        }
    }

    pub(crate) fn check(&self, key: &str, cost: u64, now: u64) -> Result<Decision, StoreError> {
        self.apply_pending(now);
        let share = self.share();
        #[cfg(feature = "live")]
        if let Some((store, capacity)) = self.live_for(key) {
            let d = store.check(key, share.cost(cost, capacity), now).value()?;
            return Ok(share.decision(d));
        }
        let memory = self.fixed();
        let cost_of = |store: &FixedStore| share.cost(cost, store.algorithm().limit());
        if let [one] = memory {
            return Ok(share.decision(one.check(key, cost_of(one), now).value()?));
        }
        let _all = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut decisions = Vec::with_capacity(memory.len());
        for (i, store) in memory.iter().enumerate() {
            let d = share.decision(store.check(key, cost_of(store), now).value()?);
            if !d.allowed {
                // Give back what the limits before it took, at once.
                for earlier in &memory[..i] {
                    let _ = earlier.refund(key, cost_of(earlier), now, now).value();
                }
                return Ok(d);
            }
            decisions.push(d);
        }
        Ok(combine(decisions))
    }

    pub(crate) fn refund(&self, key: &str, cost: u64, admitted_at: u64, now: u64) {
        let share = self.share();
        #[cfg(feature = "live")]
        if let Some((store, capacity)) = self.live_for(key) {
            let _ = store
                .refund(key, share.cost(cost, capacity), admitted_at, now)
                .value();
            return;
        }
        for store in self.fixed() {
            let cost = share.cost(cost, store.algorithm().limit());
            let _ = store.refund(key, cost, admitted_at, now).value();
        }
    }

    /// Settles every limit (see [`Store::settle`](ratelimit_core::Store::settle)),
    /// all under the lock.
    pub(crate) fn settle(
        &self,
        key: &str,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        self.apply_pending(now);
        let share = self.share();
        #[cfg(feature = "live")]
        if let Some((store, capacity)) = self.live_for(key) {
            let c = |n| share.cost(n, capacity);
            let d = at_once(store.settle(key, c(reserved), c(actual), admitted_at, now))?;
            return Ok(share.decision(d));
        }
        let _all = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut decisions = Vec::new();
        for store in self.fixed() {
            let c = |n| share.cost(n, store.algorithm().limit());
            let d = at_once(store.settle(key, c(reserved), c(actual), admitted_at, now))?;
            decisions.push(share.decision(d));
        }
        Ok(settled(decisions).0)
    }

    /// Upkeep of every memory store; the keys dropped.
    pub(crate) fn maintain(&self, now: u64) -> usize {
        let mut dropped = 0;
        self.each(|m| dropped += m.maintain(now));
        dropped
    }

    /// What the fallback's stores hold, summed.
    pub(crate) fn counts(&self) -> StoreCounts {
        let mut sum = StoreCounts::default();
        self.each(|m| sum += m.counts());
        sum
    }

    pub(crate) fn reset(&self, key: &str) {
        self.each(|m| m.reset(key));
    }

    pub(crate) fn ban(&self, key: &str, duration: Duration, now: u64) {
        self.each(|m| m.ban(key, duration, now));
    }

    pub(crate) fn unban(&self, key: &str) {
        if self.any_pending.load(Ordering::Acquire) {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.retain(|(k, _)| k != key);
        }
        self.each(|m| m.unban(key));
    }

    /// Runs `f` on each memory store: each limit's, or the shared one.
    fn each(&self, mut f: impl FnMut(&dyn Upkeep)) {
        match &self.memory {
            Memory::Fixed(memory) => memory.iter().for_each(|m| f(m)),
            #[cfg(feature = "live")]
            Memory::Live { shared, .. } => f(shared.store()),
        }
    }
}

/// A memory store's settlement, which it answers at once (a pending
/// answer, which it never gives, is an error rather than a wait).
fn at_once<T, F>(answer: Answer<Result<T, StoreError>, F>) -> Result<T, StoreError> {
    answer.into_ready().unwrap_or_else(|_| {
        Err(StoreError::unavailable(
            "other",
            "the fallback's memory store did not answer at once",
        ))
    })
}

/// What the fallback does alike to every memory store, whatever its
/// algorithm.
trait Upkeep {
    fn maintain(&self, now: u64) -> usize;
    fn counts(&self) -> StoreCounts;
    fn reset(&self, key: &str);
    fn ban(&self, key: &str, duration: Duration, now: u64);
    fn unban(&self, key: &str);
}

impl<A: Algorithm> Upkeep for MemoryStore<A, String> {
    fn maintain(&self, now: u64) -> usize {
        ratelimit_core::store::Upkeep::maintain(self, now)
    }
    fn counts(&self) -> StoreCounts {
        ratelimit_core::store::Upkeep::counts(self).unwrap_or_default()
    }
    // A memory store answers these at once, and they cannot fail.
    fn reset(&self, key: &str) {
        let _ = Store::<str>::reset(self, key).value();
    }
    fn ban(&self, key: &str, duration: Duration, now: u64) {
        let _ = Store::<str>::ban(self, key, duration, now).value();
    }
    fn unban(&self, key: &str) {
        let _ = Store::<str>::unban(self, key).value();
    }
}

/// What a store does when Redis gives no decision: asks its fallback, if
/// it has one, else returns the failure as an error; either way the
/// failure is counted and, a few lines a minute, logged.
pub(crate) struct FailurePolicy {
    /// The in-memory fallback, if the store has one.
    pub(crate) fallback: Option<Fallback>,
    /// The limit's name in metrics labels.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: &'static str,
    /// Which failures get a warning line.
    log: LogThrottle<{ Kind::COUNT }>,
}

impl FailurePolicy {
    pub(crate) fn new(fallback: Option<Fallback>, label: &'static str) -> Self {
        Self {
            fallback,
            label,
            log: LogThrottle::new(LOG_EVERY),
        }
    }

    /// The failure policy for a check Redis did not decide.
    pub(crate) fn check(
        &self,
        failure: &Failure,
        key: &str,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => {
                #[cfg(feature = "metrics")]
                metrics::counter!("ratelimit_redis_fallback_total", "limit" => self.label)
                    .increment(1);
                memory.check(key, cost, now)
            }
            None => Err(failure.to_store_error()),
        }
    }

    /// The failure policy for a refund Redis did not take.
    pub(crate) fn refund(
        &self,
        failure: &Failure,
        key: &str,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => {
                memory.refund(key, cost, admitted_at, now);
                Ok(())
            }
            None => Err(failure.to_store_error()),
        }
    }

    /// The failure policy for a settlement Redis did not take.
    pub(crate) fn settle(
        &self,
        failure: &Failure,
        key: &str,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        self.report(failure);
        match &self.fallback {
            Some(memory) => memory.settle(key, reserved, actual, admitted_at, now),
            None => Err(failure.to_store_error()),
        }
    }

    /// Counts a failure (`ratelimit_redis_errors_total{kind}`) and warns of
    /// it, a few lines a minute per kind at most, each with the number of
    /// failures of its kind not logged since the previous line. Calls
    /// skipped by the open breaker are counted, not logged: the breaker
    /// logs its opening. The key is not logged: it may be a client's API
    /// key or token.
    pub(crate) fn report(&self, failure: &Failure) {
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_errors_total", "limit" => self.label, "kind" => failure.kind.as_str())
            .increment(1);
        if failure.kind == Kind::BreakerOpen {
            return;
        }
        if let Some(suppressed) = self
            .log
            .admit(failure.kind.index(), tokio::time::Instant::now())
        {
            tracing::warn!(
                target: "ratelimit_redis",
                kind = failure.kind.as_str(),
                error = %failure.source,
                suppressed,
                fallback = self.fallback.is_some(),
                "redis gave no decision; the failure policy applies (in-memory fallback, or an error)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ban_told_by_another_instance_holds_in_the_fallback() {
        let algorithm: AnyAlgorithm = "fixed-window 100/1h".parse().unwrap();
        let fallback = Fallback::new(std::iter::once(&algorithm), 100, None);
        fallback.ban_later("10.0.0.1", Duration::from_secs(3600));
        fallback.ban_later("10.0.0.2", Duration::from_secs(3600));
        fallback.unban("10.0.0.2");
        let now = 5_000_000_000;
        let d = fallback.check("10.0.0.1", 1, now).unwrap();
        assert!(!d.allowed && d.banned, "{d:?}");
        assert!(d.wait > Some(Duration::from_secs(3500)), "{d:?}");
        assert!(fallback.check("10.0.0.2", 1, now).unwrap().allowed);
        assert!(fallback.check("10.0.0.3", 1, now).unwrap().allowed);
        // Applied once: still banned, nothing left waiting.
        assert!(!fallback.check("10.0.0.1", 1, now + 1).unwrap().allowed);
        assert!(fallback.pending.lock().unwrap().is_empty());
        for i in 0..=MAX_PENDING {
            fallback.ban_later(&format!("k{i}"), Duration::from_secs(1));
        }
        assert_eq!(fallback.pending.lock().unwrap().len(), MAX_PENDING);
    }
}
