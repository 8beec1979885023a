//! Connection and topology: where a store connects (one server, TLS, a
//! Sentinel's master, a Cluster), the one multiplexed connection kept up
//! in the background, the thread it is driven on, and whose clock a check
//! reads.

#[cfg(feature = "cluster")]
pub(crate) mod cluster_target;
pub(crate) mod conn;
pub(crate) mod driver;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;
pub(crate) mod target;
pub(crate) mod time_source;
