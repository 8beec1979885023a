//! The scripts: which Lua script runs an algorithm (`plan`), its
//! arguments (`args`), a store's one script and its replies (`script`),
//! and the one decision of several limits (`combine`). The Lua sources
//! are in `lua/`.

pub(crate) mod args;
pub(crate) mod combine;
pub(crate) mod plan;
pub(crate) mod script;
