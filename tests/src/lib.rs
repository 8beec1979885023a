//! Cross-crate integration tests live in `tests/`: the example apps probed
//! as a client would, and the worked examples of the contract
//! (`docs/ALGORITHMS.md`) replayed through the simulator.
//!
//! [`redis_server`] starts a private `redis-server` for the tests of the
//! examples on Redis; [`spawned`] runs an example binary and reads its logs
//! (both re-exported from `ratelimit-test-support`).

pub use ratelimit_test_support::{redis_server, spawned};

/// The top-level README's Rust blocks, compiled as doctests (they need
/// `tower-ratelimit`, `ratelimit-redis`, axum and tokio, which this crate
/// has; the published crates cannot see the workspace README).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The guide's Rust blocks (`docs/guide/`), compiled as doctests here for
/// the same reason: this crate has every crate they use.
#[cfg(doctest)]
mod guide {
    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/quick-start.md")]
    struct QuickStart;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/cookbook.md")]
    struct Cookbook;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/responses.md")]
    struct Responses;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/policy-file.md")]
    struct PolicyFile;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/costs.md")]
    struct Costs;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/proxies.md")]
    struct Proxies;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/redis.md")]
    struct Redis;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/beyond-http.md")]
    struct BeyondHttp;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/operations.md")]
    struct Operations;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/security.md")]
    struct Security;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/algorithms.md")]
    struct Algorithms;

    #[cfg(doctest)]
    #[doc = include_str!("../../docs/guide/what-if.md")]
    struct WhatIf;
}

/// ratelimit-redis's README, compiled here: its first example is a policy
/// table on Redis, and a dev-dependency of ratelimit-redis on
/// tower-ratelimit would make a cycle with tower-ratelimit's `redis` feature.
#[cfg(doctest)]
#[doc = include_str!("../../crates/ratelimit-redis/README.md")]
struct RedisReadme;
