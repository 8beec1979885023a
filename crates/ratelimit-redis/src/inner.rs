//! The shared part of a [`RedisStore`] (`Inner`, what its clones share)
//! and the path of a call through it: the deny cache, leases, breaker and
//! timeout, the script, the failure policy; refunds and settlements.

use crate::connect::conn::Conn;
use crate::connect::time_source::TimeSource;
use crate::fleet::deny_cache::DenyCache;
use crate::fleet::lease::{Leases, Spend};
use crate::fleet::roster::Roster;
use crate::fleet::write_back_state::WriteBack;
use crate::outage::breaker::{Breaker, BreakerState, Outcome};
use crate::outage::failure::{Failure, Kind};
use crate::outage::fallback::FailurePolicy;
use crate::scripts::combine::settled;
use crate::scripts::script::{Op, Script};
use ratelimit_core::plumbing::saturating_nanos;
use ratelimit_core::{Algorithm, Decision, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// A rate-limit store in Redis, for any of the six algorithms of
/// ratelimit-core, deciding exactly as they do.
///
/// Each check is one atomic round trip (a Lua script through `EVALSHA`,
/// reloaded on `NOSCRIPT`) on a shared multiplexed connection. See the
/// crate docs for the failure policy. Cloning is cheap and shares
/// everything.
///
/// ```
/// use ratelimit_core::{Clock, Gcra, Store, SystemClock};
/// use ratelimit_redis::RedisStore;
/// use std::time::Duration;
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let url = "redis://127.0.0.1/";
///     # // Nothing listens on port 1: this example runs on the fallback.
///     # let url = "redis://127.0.0.1:1/";
///     let store = RedisStore::builder(url, Gcra::new(100, Duration::from_secs(60))?)
///         .prefix("api:")
///         .timeout(Duration::from_millis(20))
///         .fallback_to_memory(100_000)
///         .build()?;
///     let clock = SystemClock::new();
///     let decision = store.check("10.0.0.1", 1, clock.now()).await?;
///     assert!(decision.allowed);
///     assert_eq!(decision.remaining, 99);
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

/// What every clone of a store shares.
pub(crate) struct Inner {
    pub(crate) conn: Arc<Conn>,
    /// The instances sharing its limits, with a fallback.
    pub(crate) roster: Option<Arc<Roster>>,
    /// The store's script on `conn`: keys, arguments, replies.
    pub(crate) script: Arc<Script>,
    pub(crate) timeout: Duration,
    pub(crate) breaker: Breaker,
    /// The limit's name in metrics labels.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) label: &'static str,
    /// What a call Redis did not decide gets.
    pub(crate) policy: FailurePolicy,
    /// Keys Redis denied, answered locally until their wait runs out.
    pub(crate) deny: Option<DenyCache>,
    /// The origin of the deny cache's clock with [`TimeSource::Redis`].
    pub(crate) origin: tokio::time::Instant,
    /// Units taken ahead for keys, spent locally.
    pub(crate) leases: Option<Leases>,
    /// The bans and denials this store holds, written back to a Redis
    /// that lost them.
    pub(crate) write_back: WriteBack,
}

impl Inner {
    /// Runs `op` under the breaker and the timeout. The timeout runs from
    /// when the connection is in hand (with the script loaded on it), so
    /// it measures Redis's answer: waiting for the store's first
    /// connection or a script's first load is not charged to it.
    pub(crate) async fn guarded(
        &self,
        key: &str,
        cost: u64,
        now: u64,
        op: Op,
    ) -> Result<Vec<i64>, Failure> {
        let Some(permit) = self.breaker.admit() else {
            return Err(Failure::new(Kind::BreakerOpen, "circuit breaker open"));
        };
        let result = match self.conn.ready(&self.script.slot, self.timeout).await {
            Ok(conn) => {
                let call = self.script.call(conn, key, cost, now, &op);
                #[cfg(feature = "metrics")]
                let started = std::time::Instant::now();
                let result = match tokio::time::timeout(self.timeout, call).await {
                    Ok(r) => r,
                    Err(_) => Err(Failure::new(
                        Kind::Timeout,
                        format!("no answer within {:?}", self.timeout),
                    )),
                };
                #[cfg(feature = "metrics")]
                metrics::histogram!("ratelimit_store_duration_seconds", "store" => "redis", "limit" => self.label)
                    .record(started.elapsed().as_secs_f64());
                result
            }
            Err(failure) => Err(failure),
        };
        // Anything but a decision counts against Redis: an error reply
        // (OOM, NOPERM, READONLY, a foreign value at the key, ...) as much
        // as a timeout. A slow answer within the timeout is a decision.
        let outcome = match &result {
            Ok(_) => Outcome::Answered,
            Err(_) => Outcome::Failed,
        };
        if permit.settle(outcome) {
            // Opened: a fresh connection is made in the background, for
            // the probe; the current one serves until it is ready.
            self.conn.refresh();
        }
        result
    }

    /// The deny cache's time: the caller's `now` with
    /// [`TimeSource::Caller`], else the local monotonic clock (its rate,
    /// not its origin, matters: a denial's wait is counted from it).
    pub(crate) fn local_now(&self, now: u64) -> u64 {
        match self.script.time {
            TimeSource::Caller => now,
            TimeSource::Redis => saturating_nanos(self.origin.elapsed()),
        }
    }

    pub(crate) async fn check(
        self: &Arc<Self>,
        key: String,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        // Only cost-1 denials are cached: their `remaining` is 0 and stays
        // 0 until the wait ends, so the cached answer is the exact one. A
        // peek (cost 0) is always admitted and reports a `remaining` that
        // moves; a cost-n denial's `remaining` grows while it stands.
        let deny = self.deny.as_ref().filter(|_| cost == 1);
        // Read before the call: Redis decides after it, so the wait is
        // counted down from no later than the real denial.
        // (The deny cache was looked up by `Store::check`, see `cached`.)
        let local = self.local_now(now);
        if let Some(leases) = self.leases.as_ref().filter(|_| cost == 1) {
            let (spend, expired) = leases.spend(&key, local);
            if let Some(u) = expired {
                // Back before the next lease is taken, so that it counts.
                let _ = self.refund(u.key, u.units, u.taken_at, now).await;
            }
            match spend {
                Spend::Spent(d) => return Ok(d),
                Spend::Hot => {
                    if let Some(answer) = self.take_lease(leases, &key, now, local).await {
                        return answer;
                    }
                }
                Spend::Cold => {}
            }
        }
        self.decide(key, cost, now, local, deny).await
    }

    /// An ordinary check in Redis, its denial remembered in `deny`.
    async fn decide(
        self: &Arc<Self>,
        key: String,
        cost: u64,
        now: u64,
        local: u64,
        deny: Option<&DenyCache>,
    ) -> Result<Decision, StoreError> {
        let ticket = deny.map(|cache| cache.ticket(&key));
        match self.guarded(&key, cost, now, Op::Check).await {
            Ok(v) => {
                let (d, part) = self.script.decision(&v);
                if d.allowed {
                    self.admitted(&key, now, local);
                } else if let (Some(cache), Some(ticket)) = (deny, ticket) {
                    cache.remember(ticket, local, &d, part);
                }
                self.hold_answer(&key, local, &v, &d, part);
                Ok(d)
            }
            Err(failure) => self.fall_back(&failure, &key, cost, now),
        }
    }

    /// The deny cache's answer to a check, if it has one (see `check`).
    pub(crate) fn cached(&self, key: &str, cost: u64, now: u64) -> Option<Decision> {
        let cache = self.deny.as_ref().filter(|_| cost == 1)?;
        let constants = |i: usize| {
            let a = &self.script.parts[i].algorithm;
            (a.limit(), a.window())
        };
        let d = cache.denied(key, self.local_now(now), constants)?;
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_deny_cache_hits_total", "limit" => self.label)
            .increment(1);
        Some(d)
    }

    pub(crate) async fn refund(
        &self,
        key: String,
        cost: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
        self.write_back.held.forget_denial(&key);
        if self.breaker.state() == BreakerState::Open {
            if let Some(memory) = &self.policy.fallback {
                memory.refund(&key, cost, admitted_at, now);
                return Ok(());
            }
        }
        let result = self
            .guarded(&key, cost, now, Op::Refund { admitted_at })
            .await;
        // Again once Redis has it: a check in flight meanwhile, denied
        // before the refund, is not remembered (see `deny_cache`).
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
        match result {
            Ok(_) => Ok(()),
            Err(failure) => self.policy.refund(&failure, &key, cost, admitted_at, now),
        }
    }

    /// Settles `key` (see [`Store::settle`]) in one script: up charges
    /// `actual - reserved` whatever is left, down refunds `reserved -
    /// actual`. The key's remembered denial is forgotten and its lease
    /// given back first, so that its next checks see the settled state; a
    /// key left in debt is remembered in the deny cache as a cost-1
    /// check's denial (its wait is the peek's `next`).
    pub(crate) async fn settle(
        &self,
        key: String,
        reserved: u64,
        actual: u64,
        admitted_at: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
        self.write_back.held.forget_denial(&key);
        if let Some(u) = self.leases.as_ref().and_then(|l| l.take_key(&key)) {
            let _ = self.refund(u.key, u.units, u.taken_at, now).await;
        }
        if self.breaker.state() == BreakerState::Open {
            if let Some(memory) = &self.policy.fallback {
                return memory.settle(&key, reserved, actual, admitted_at, now);
            }
        }
        let up = actual >= reserved;
        let cost = actual.abs_diff(reserved);
        let local = self.local_now(now);
        let result = self
            .guarded(&key, cost, now, Op::Settle { admitted_at, up })
            .await;
        // Again once Redis has it, as a refund does.
        if let Some(cache) = &self.deny {
            cache.forget(&key);
        }
        match result {
            Ok(v) => {
                let parts = (0..v.len() / 5).map(|i| self.script.part_decision(&v, i));
                let (d, part) = settled(parts.collect());
                if !d.allowed {
                    let denial = Decision::denied(d.limit, d.window, d.reset, d.next);
                    self.hold(&key, local, denial.wait, part, false);
                    if let Some(cache) = &self.deny {
                        cache.remember(cache.ticket(&key), local, &denial, part);
                    }
                }
                Ok(d)
            }
            Err(failure) => self
                .policy
                .settle(&failure, &key, reserved, actual, admitted_at, now),
        }
    }
}
