//! Cross-crate integration tests live in `tests/`: the example apps probed
//! as a client would, and the worked examples of the contract
//! (`docs/ALGORITHMS.md`) replayed through the simulator.
//!
//! [`redis_server`] starts a private `redis-server` for the tests of the
//! examples on Redis; [`spawned`] runs an example binary and reads its logs
//! (both re-exported from `ratelimit-test-support`).

pub use ratelimit_test_support::{redis_server, spawned};

/// The top-level README's Rust snippets, compiled as doctests (they need
/// `tower-ratelimit`, `ratelimit-redis`, axum and tokio, which this crate
/// has; the published crates cannot see the workspace README).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
