//! Fleet state: what an instance holds or agrees on with the others
//! sharing the Redis: leases, the deny cache, invalidation by pub/sub,
//! the roster of instances, held bans written back after a data loss,
//! the key secret and the names it gives keys, and shared list entries.

pub(crate) mod deny_cache;
pub(crate) mod held;
pub(crate) mod invalidation;
pub(crate) mod key_name;
pub(crate) mod key_secret;
pub(crate) mod lease;
pub(crate) mod leasing;
pub(crate) mod listen;
pub(crate) mod roster;
pub(crate) mod shared_entries;
pub(crate) mod write_back;
pub(crate) mod write_back_state;
