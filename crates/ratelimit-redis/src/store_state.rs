//! Where a store's decisions come from right now: for readiness probes
//! and dashboards.

/// Where a store's decisions come from right now.
///
/// ```
/// use ratelimit_core::{Gcra, Store};
/// use ratelimit_redis::{BreakerConfig, RedisStore, StoreState};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # // Nothing listens on port 1: every call to Redis fails.
/// let store = RedisStore::builder("redis://127.0.0.1:1/", Gcra::new(5, Duration::from_secs(1))?)
///     .breaker(BreakerConfig { failure_threshold: 1, cool_down: Duration::from_secs(60) })
///     .fallback_to_memory(1_000)
///     .build()?;
/// assert!(store.check("alice", 1, 0).await?.allowed);
/// assert_eq!(store.state(), StoreState::Fallback);
/// assert!(store.state().decides());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreState {
    /// This instance's memory (a memory store).
    Memory,
    /// Redis: the circuit breaker is closed.
    Redis,
    /// The in-memory fallback: Redis is failing (the breaker is open or
    /// probing), and the store decides in memory meanwhile.
    Fallback,
    /// No decisions: Redis is failing and the store has no fallback, so
    /// every check is a store failure for the caller's failure policy.
    Down,
}

impl StoreState {
    /// The state's name: `memory`, `redis`, `fallback` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "redis",
            Self::Fallback => "fallback",
            Self::Down => "down",
        }
    }

    /// Whether checks get decisions (from Redis, memory or the fallback).
    pub fn decides(self) -> bool {
        self != Self::Down
    }
}
