//! Where the time of a check comes from: the Redis server's, or the caller's.

#[cfg(doc)]
use ratelimit_core::{MemoryStore, Store};

/// Where the time of a check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeSource {
    /// The Redis server's `TIME`, read inside the script (the default): the
    /// instances' clocks don't matter, and the `now` passed to
    /// [`Store::check`] is ignored (it is still used by the in-memory
    /// fallback). For a refund, the caller's `now - admitted_at` is taken
    /// back from the server's time.
    #[default]
    Redis,
    /// The `now` passed by the caller, as nanoseconds since the Unix epoch
    /// (or any origin shared by every instance). Decisions are then
    /// identical, field for field, to a [`MemoryStore`] given the same
    /// times; meant for tests and for fleets with synchronised clocks.
    Caller,
}
