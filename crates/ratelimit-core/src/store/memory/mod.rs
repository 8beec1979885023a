//! The in-memory keyed store: sharded, concurrent and bounded.
//!
//! [`MemoryStore`] (`store.rs`: its shards, how a key finds its shard, an
//! insert) is built by [`MemoryStoreBuilder`] (`builder.rs`), with
//! [`AtCapacity`] (`at_capacity.rs`) saying what a full store does. Its
//! operations: checks (`check.rs`), refunds and settlements
//! (`settle.rs`), bans and resets (`ban_reset.rs`), upkeep
//! (`upkeep.rs`), and the [`Store`](crate::Store) impl that answers
//! each at once (`store_impl.rs`).

mod at_capacity;
mod ban_reset;
mod builder;
mod check;
mod settle;
mod store;
mod store_impl;
mod upkeep;

pub use at_capacity::AtCapacity;
pub use builder::{MemoryStoreBuilder, DEFAULT_MAX_KEYS};
pub use store::MemoryStore;
