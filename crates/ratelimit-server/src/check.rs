//! A request's descriptors checked all or nothing: if one is over, none takes anything.

use crate::limits::Limits;
use crate::rule::{Entry, Rule, LOG_SHADOW, LOG_STORE};
use ratelimit_core::{Decision, Store, StoreError};
use std::sync::Arc;

/// The longest state key, in bytes: memory per key stays bounded
/// whatever a caller sends.
pub const MAX_KEY_BYTES: usize = 512;

/// A state key longer than [`MAX_KEY_BYTES`]: the call is refused.
///
/// ```
/// use ratelimit_server::{Config, Hit, Limits, MAX_KEY_BYTES};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let long = "x".repeat(MAX_KEY_BYTES + 1);
/// let err = Hit::resolve(&limits, "edge", &[("remote_address", &long)], 1, "none").unwrap_err();
/// assert_eq!((err.limit.as_str(), err.len), ("per-ip", MAX_KEY_BYTES + 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTooLong {
    /// The limit.
    pub limit: String,
    /// The key's length in bytes.
    pub len: usize,
}

impl std::fmt::Display for KeyTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "limit {:?}: a key of {} bytes, longer than {MAX_KEY_BYTES}",
            self.limit, self.len
        )
    }
}

impl std::error::Error for KeyTooLong {}

/// One descriptor resolved to its limit and state key, with its cost.
///
/// ```
/// use ratelimit_server::{Config, Hit, Limits};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let hit = Hit::resolve(&limits, "edge", &[("remote_address", "10.0.0.1")], 0, "none").unwrap();
/// assert_eq!((hit.key.as_str(), hit.cost), ("10.0.0.1", 0));
/// // A descriptor no limit matches is admitted.
/// let free = Hit::resolve(&limits, "other", &[("remote_address", "10.0.0.1")], 1, "none").unwrap();
/// assert!(free.rule.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct Hit {
    /// The limit it answers to (`None`: no limit matches; it is admitted).
    pub rule: Option<Arc<Rule>>,
    /// The state key within that limit.
    pub key: String,
    /// What it takes (0: a peek, which takes nothing).
    pub cost: u64,
}

impl Hit {
    /// The hit of a descriptor of `entries` in `domain`, of `cost`, in a
    /// request of the plan `plan` (`"none"`: no plan; see
    /// [`Limits::find`]).
    ///
    /// ```
    /// use ratelimit_server::{Config, Hit, Limits};
    ///
    /// let config = Config::parse(r#"
    ///     [[limit]]
    ///     name = "per-ip"
    ///     domain = "edge"
    ///     algorithm = "fixed-window 10/1m"
    ///     descriptors = [{ key = "remote_address" }]
    /// "#, "inline", |_| None).unwrap();
    /// let limits = Limits::new(&config).unwrap();
    /// let hit = Hit::resolve(&limits, "edge", &[("remote_address", "10.0.0.1")], 1, "none").unwrap();
    /// assert_eq!(hit.key, "10.0.0.1");
    /// assert_eq!(hit.rule.unwrap().config.name, "per-ip");
    /// let long = "x".repeat(ratelimit_server::MAX_KEY_BYTES + 1);
    /// assert!(Hit::resolve(&limits, "edge", &[("remote_address", &long)], 1, "none").is_err());
    /// ```
    pub fn resolve(
        limits: &Limits,
        domain: &str,
        entries: &[Entry<'_>],
        cost: u64,
        plan: &str,
    ) -> Result<Self, KeyTooLong> {
        match limits.find(domain, entries, plan) {
            Some(rule) => Self::of(rule, rule.key(entries), cost),
            None => {
                crate::unmatched::unmatched(domain, entries);
                Ok(Self {
                    rule: None,
                    key: String::new(),
                    cost,
                })
            }
        }
    }

    /// The hit of `key` on `rule`, of `cost`.
    pub fn of(rule: &Arc<Rule>, key: String, cost: u64) -> Result<Self, KeyTooLong> {
        if key.len() > MAX_KEY_BYTES {
            return Err(KeyTooLong {
                limit: rule.config.name.clone(),
                len: key.len(),
            });
        }
        Ok(Self {
            rule: Some(Arc::clone(rule)),
            key,
            cost,
        })
    }
}

/// What one descriptor got.
///
/// ```
/// use ratelimit_server::{check_all, Config, Hit, Limits};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let hit = Hit::resolve(&limits, "edge", &[("remote_address", "10.0.0.1")], 1, "none").unwrap();
/// let outcome = check_all(&[hit], 0).await.unwrap();
/// let status = &outcome.statuses[0];
/// assert!(!status.over && !status.shadow_over);
/// assert_eq!(status.decision.unwrap().remaining, 0);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Status {
    /// The limit it answered to, if any.
    pub rule: Option<Arc<Rule>>,
    /// The store's decision (`None` for no limit or an unlimited one).
    /// After a refusal elsewhere in the request, a peek's: what is left
    /// once the request took nothing.
    pub decision: Option<Decision>,
    /// This descriptor refused the request.
    pub over: bool,
    /// A shadow limit would have refused it (it was admitted).
    pub shadow_over: bool,
}

/// A request's outcome: over if any descriptor is, with every descriptor's status.
///
/// ```
/// use ratelimit_server::{check_all, Config, Hit, Limits};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let hits = [
///     Hit::resolve(&limits, "edge", &[("remote_address", "10.0.0.1")], 1, "none").unwrap(),
///     Hit::resolve(&limits, "edge", &[("remote_address", "10.0.0.2")], 1, "none").unwrap(),
/// ];
/// assert!(!check_all(&hits, 0).await.unwrap().over);
/// // Both keys are spent: the next request is over, on each descriptor.
/// let outcome = check_all(&hits, 0).await.unwrap();
/// assert!(outcome.over);
/// assert_eq!(outcome.statuses.len(), 2);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Some descriptor is over its limit: the request is refused and took nothing.
    pub over: bool,
    /// One per descriptor, in order.
    pub statuses: Vec<Status>,
}

/// Checks `hits` at `now` (nanoseconds of the stores' clock): each in order
/// until one is over (a shadow limit's denial is not); then what the
/// others took is refunded and every descriptor is peeked for its status.
pub async fn check_all(hits: &[Hit], now: u64) -> Result<Outcome, StoreError> {
    let mut statuses = Vec::with_capacity(hits.len());
    let mut over_at = None;
    for (i, hit) in hits.iter().enumerate() {
        let status = match check_one(hit, hit.cost, now).await {
            Ok(status) => status,
            Err(e) => {
                // The call fails: it takes nothing either (best effort).
                let _ = refund_taken(hits, &statuses, now).await;
                return Err(e);
            }
        };
        let over = status.over;
        statuses.push(status);
        if over {
            over_at = Some(i);
            break;
        }
    }
    let Some(over_at) = over_at else {
        let outcome = Outcome {
            over: false,
            statuses,
        };
        count(hits, &outcome);
        return Ok(outcome);
    };
    refund_taken(hits, &statuses[..over_at], now).await?;
    for (i, hit) in hits.iter().enumerate() {
        if i == over_at {
            continue;
        }
        let mut peek = check_one(hit, 0, now).await?;
        peek.over = false;
        if i < over_at {
            peek.shadow_over = statuses[i].shadow_over;
            statuses[i] = peek;
        } else {
            statuses.push(peek);
        }
    }
    let outcome = Outcome {
        over: true,
        statuses,
    };
    count(hits, &outcome);
    Ok(outcome)
}

/// Gives back what the first `statuses.len()` hits took: every refund is
/// tried; the first failure is the answer.
async fn refund_taken(hits: &[Hit], statuses: &[Status], now: u64) -> Result<(), StoreError> {
    let mut first_error = Ok(());
    for (hit, status) in hits.iter().zip(statuses) {
        let took = status.decision.is_some_and(|d| d.allowed) && hit.cost > 0;
        if let (true, Some((_, store))) = (took, store_of(hit)) {
            let refunded = store.refund(&hit.key, hit.cost, now, now).await;
            if first_error.is_ok() {
                first_error = refunded;
            }
        }
    }
    first_error
}

/// The hit's limit and its store, for a limit that has one.
fn store_of(hit: &Hit) -> Option<(&Rule, &ratelimit_core::BoxStore<String>)> {
    let rule = hit.rule.as_deref()?;
    Some((rule, rule.store.as_ref()?))
}

async fn check_one(hit: &Hit, cost: u64, now: u64) -> Result<Status, StoreError> {
    let Some((rule, store)) = store_of(hit) else {
        return Ok(Status {
            rule: hit.rule.clone(),
            decision: None,
            over: false,
            shadow_over: false,
        });
    };
    let decision = match store.check(&hit.key, cost, now).await {
        Ok(decision) => decision,
        Err(e) => {
            rule.metrics().error.increment(1);
            if let Some(held) = rule.logs.admit(LOG_STORE, now) {
                tracing::warn!(limit = %rule.config.name, error = %e, held_back = held, "store failed: the call is answered as an error");
            }
            return Err(e);
        }
    };
    Ok(Status::of(hit, decision, now))
}

impl Status {
    /// The status of `hit` given the store's `decision` at `now`: over
    /// when refused, unless its limit is a shadow (then logged).
    pub(crate) fn of(hit: &Hit, decision: Decision, now: u64) -> Self {
        let shadow = hit.rule.as_ref().is_some_and(|r| r.config.shadow);
        let shadow_over = !decision.allowed && shadow;
        if let (true, Some(rule)) = (shadow_over, &hit.rule) {
            if let Some(held) = rule.logs.admit(LOG_SHADOW, now) {
                tracing::info!(limit = %rule.config.name, held_back = held, "shadow limit would refuse (admitted: dry run)");
            }
        }
        Self {
            rule: hit.rule.clone(),
            decision: Some(decision),
            over: !decision.allowed && !shadow,
            shadow_over,
        }
    }
}

/// Counts a request's decisions: the descriptor that refused it
/// (`refused`), or each descriptor of an admitted request (`admitted`,
/// `peek` for a cost of 0, `shadow_refused` for a shadow limit's
/// would-be refusal). The others of a refused request took nothing and
/// count nothing.
fn count(hits: &[Hit], outcome: &Outcome) {
    for (hit, status) in hits.iter().zip(&outcome.statuses) {
        let Some(rule) = status.rule.as_deref().filter(|r| r.store.is_some()) else {
            continue;
        };
        let m = rule.metrics();
        let counter = if status.over {
            &m.refused
        } else if outcome.over {
            continue;
        } else if status.shadow_over {
            &m.shadow_refused
        } else if hit.cost == 0 {
            &m.peek
        } else {
            &m.admitted
        };
        counter.increment(1);
    }
}
