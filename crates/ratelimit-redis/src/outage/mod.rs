//! While Redis fails: the kinds of failure, the circuit breaker, the
//! failure policy and its in-memory fallback (a live store's too), the
//! bans an instance holds refused by that fallback, an
//! instance's share of a limit during an outage, and throttled logs.

pub(crate) mod breaker;
pub(crate) mod failure;
pub(crate) mod fallback;
pub(crate) mod held_bans;
#[cfg(feature = "live")]
pub(crate) mod live_fallback;
pub(crate) mod log_throttle;
pub(crate) mod share;
