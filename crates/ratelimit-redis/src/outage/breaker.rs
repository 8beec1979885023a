//! The circuit breaker: while Redis is failing, calls fail fast instead of
//! each waiting out a timeout.

use crate::outage::log_throttle::{LogThrottle, LOG_EVERY};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The breaker's log lines that are rate-limited (see [`LogThrottle`]):
/// during a long outage a probe fails, and the breaker reopens, every
/// cool-down.
const LOG_OPENED: usize = 0;
const LOG_CLOSED: usize = 1;

/// Settings of the circuit breaker.
///
/// After `failure_threshold` consecutive failures (timeouts, connection
/// errors, error replies: anything but a decision) the breaker opens:
/// calls skip Redis and take the failure policy at once (the in-memory
/// fallback, or an error). After `cool_down` one call is let through as a
/// probe (half-open): its success closes the breaker, its failure opens it
/// for another `cool_down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (at least 1).
    pub failure_threshold: u32,
    /// How long the breaker stays open before a probe.
    pub cool_down: Duration,
}

impl Default for BreakerConfig {
    /// 5 consecutive failures, 1 s cool-down.
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cool_down: Duration::from_secs(1),
        }
    }
}

/// The state of the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go to Redis.
    Closed,
    /// Calls skip Redis until the cool-down ends.
    Open,
    /// One probe call is in flight to Redis; the others skip it.
    HalfOpen,
}

impl BreakerState {
    /// The state's name, as logged and in metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    failures: u32,
    opened_at: Instant,
    probing: bool,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    config: BreakerConfig,
    /// The limit's name in metrics labels.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: &'static str,
    inner: Mutex<Inner>,
    log: LogThrottle<2>,
}

/// Leave to call Redis; a probe's permit must be settled (or it is settled
/// as a failure when dropped, e.g. when the caller gave up).
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
    settled: bool,
}

/// What happened to a settled call.
pub(crate) enum Outcome {
    /// Redis decided.
    Answered,
    /// No decision: Redis could not be reached in time, or answered with
    /// an error.
    Failed,
}

impl Breaker {
    #[cfg(test)]
    pub(crate) fn new(config: BreakerConfig) -> Self {
        Self::labelled(config, "")
    }

    /// A breaker whose metrics carry `limit = label`.
    pub(crate) fn labelled(config: BreakerConfig, label: &'static str) -> Self {
        // The gauge exists from the start (closed), not only after a change.
        #[cfg(feature = "metrics")]
        metrics::gauge!("ratelimit_redis_breaker_state", "limit" => label).set(0.0);
        Self {
            label,
            config: BreakerConfig {
                failure_threshold: config.failure_threshold.max(1),
                ..config
            },
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                failures: 0,
                opened_at: Instant::now(),
                probing: false,
            }),
            log: LogThrottle::new(LOG_EVERY),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn state(&self) -> BreakerState {
        self.lock().state
    }

    /// A permit to call Redis, or `None` while the breaker is open.
    pub(crate) fn admit(&self) -> Option<Permit<'_>> {
        let mut g = self.lock();
        let probe = match g.state {
            BreakerState::Closed => false,
            BreakerState::Open if g.opened_at.elapsed() >= self.config.cool_down => {
                self.transition(&mut g, BreakerState::HalfOpen, "cool-down over, probing");
                g.probing = true;
                true
            }
            BreakerState::HalfOpen if !g.probing => {
                g.probing = true;
                true
            }
            BreakerState::Open | BreakerState::HalfOpen => return None,
        };
        Some(Permit {
            breaker: self,
            probe,
            settled: false,
        })
    }

    /// Records an outcome; returns whether the breaker just opened.
    fn settle(&self, probe: bool, outcome: Outcome) -> bool {
        let mut g = self.lock();
        if probe {
            g.probing = false;
        }
        match outcome {
            Outcome::Answered => {
                g.failures = 0;
                if g.state == BreakerState::HalfOpen && probe {
                    self.transition(&mut g, BreakerState::Closed, "probe succeeded");
                }
                false
            }
            Outcome::Failed => match g.state {
                BreakerState::Closed => {
                    g.failures += 1;
                    if g.failures >= self.config.failure_threshold {
                        g.opened_at = Instant::now();
                        self.transition(&mut g, BreakerState::Open, "consecutive failures");
                        true
                    } else {
                        false
                    }
                }
                BreakerState::HalfOpen if probe => {
                    g.opened_at = Instant::now();
                    self.transition(&mut g, BreakerState::Open, "probe failed");
                    true
                }
                _ => false,
            },
        }
    }
}

impl Permit<'_> {
    /// Whether this call is the half-open probe.
    #[cfg(test)]
    pub(crate) fn is_probe(&self) -> bool {
        self.probe
    }

    /// Records the call's outcome; returns whether the breaker just opened.
    pub(crate) fn settle(mut self, outcome: Outcome) -> bool {
        self.settled = true;
        self.breaker.settle(self.probe, outcome)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.settled && self.probe {
            // The caller gave up on the probe: count it as failed, so the
            // breaker does not wait for a probe that never ends.
            self.breaker.settle(true, Outcome::Failed);
        }
    }
}

impl Breaker {
    /// Moves to `to`, logging it: opening at `warn` and closing at `info`,
    /// each at most a few lines a minute, with the count of transitions
    /// not logged since; half-opening (every cool-down while Redis is down)
    /// at `debug`.
    fn transition(&self, g: &mut Inner, to: BreakerState, why: &'static str) {
        let from = g.state;
        g.state = to;
        match to {
            BreakerState::Open => {
                if let Some(suppressed) = self.log.admit(LOG_OPENED, Instant::now()) {
                    tracing::warn!(
                        target: "ratelimit_redis::breaker",
                        from = from.as_str(),
                        to = to.as_str(),
                        failures = g.failures,
                        reason = why,
                        suppressed,
                        "redis circuit breaker opened: checks skip redis and take the failure policy"
                    );
                }
            }
            BreakerState::HalfOpen => tracing::debug!(
                target: "ratelimit_redis::breaker",
                from = from.as_str(),
                to = to.as_str(),
                reason = why,
                "redis circuit breaker half-open: probing redis"
            ),
            BreakerState::Closed => {
                if let Some(suppressed) = self.log.admit(LOG_CLOSED, Instant::now()) {
                    tracing::info!(
                        target: "ratelimit_redis::breaker",
                        from = from.as_str(),
                        to = to.as_str(),
                        reason = why,
                        suppressed,
                        "redis circuit breaker closed: redis is back"
                    );
                }
            }
        }
        if to == BreakerState::Open {
            g.failures = 0;
        }
        #[cfg(feature = "metrics")]
        {
            metrics::counter!(
                "ratelimit_redis_breaker_transitions_total",
                "limit" => self.label,
                "from" => from.as_str(),
                "to" => to.as_str()
            )
            .increment(1);
            metrics::gauge!("ratelimit_redis_breaker_state", "limit" => self.label).set(match to {
                BreakerState::Closed => 0.0,
                BreakerState::HalfOpen => 1.0,
                BreakerState::Open => 2.0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_and_recovers_through_a_probe() {
        let b = Breaker::new(BreakerConfig {
            failure_threshold: 2,
            cool_down: Duration::ZERO,
        });
        assert!(!b.admit().unwrap().settle(Outcome::Failed));
        assert!(b.admit().unwrap().settle(Outcome::Failed));
        assert_eq!(b.state(), BreakerState::Open);
        // Cool-down of zero: the next call is the probe, others are refused.
        let probe = b.admit().unwrap();
        assert!(probe.is_probe());
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(b.admit().is_none());
        probe.settle(Outcome::Answered);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn an_abandoned_probe_reopens() {
        let b = Breaker::new(BreakerConfig {
            failure_threshold: 1,
            cool_down: Duration::ZERO,
        });
        b.admit().unwrap().settle(Outcome::Failed);
        drop(b.admit().unwrap());
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.admit().unwrap().is_probe());
    }

    #[test]
    fn answers_reset_the_count() {
        let b = Breaker::new(BreakerConfig {
            failure_threshold: 2,
            cool_down: Duration::from_secs(60),
        });
        b.admit().unwrap().settle(Outcome::Failed);
        b.admit().unwrap().settle(Outcome::Answered);
        b.admit().unwrap().settle(Outcome::Failed);
        assert_eq!(b.state(), BreakerState::Closed);
        b.admit().unwrap().settle(Outcome::Failed);
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.admit().is_none());
    }
}
