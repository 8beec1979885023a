//! Where a store's decisions come from right now: for readiness probes
//! and dashboards.

/// Where a store's decisions come from right now.
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
