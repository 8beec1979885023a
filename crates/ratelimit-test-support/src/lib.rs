//! The workspace's shared test helpers (`publish = false`), free of the
//! workspace's own crates, so any crate can take it as a dev-dependency
//! (ratelimit-core included, without a second copy of core).
//!
//! - [`redis_server`]: a private `redis-server` per test on a free port,
//!   skipped loudly without one (a failure under `CI=true`);
//! - `tls` (feature `tls`): a private CA and server certificate for a
//!   test, and a `redis-server --tls-port` using them;
//! - [`redis_cluster`]: [`RedisCluster`], a private Redis Cluster of such
//!   servers (masters and replicas), a master killed on demand;
//! - [`redis_sentinel`]: a private master, replica and Sentinel;
//! - [`spawned`]: an example binary run as a process, its logs read;
//! - [`rng`]: [`SplitMix64`], a seeded generator so failures reproduce;
//! - [`alloc`]: [`CountingAlloc`], a global allocator counting live bytes
//!   (each test binary declares its own `#[global_allocator] static`);
//! - [`history`]: a linearizability checker of stores' concurrent
//!   histories, per key, against the reference models;
//! - [`model`]: the reference models of the six algorithms, from the
//!   contract (`docs/ALGORITHMS.md`);
//! - [`backend`]: [`Backend`], a simulated tower service whose latency
//!   grows past its capacity (fair queuing and adaptive concurrency);
//! - [`delay_proxy`]: [`DelayProxy`], a TCP proxy adding a fixed latency
//!   without a queue (a slow Redis).

pub mod alloc;
pub mod backend;
pub mod delay_proxy;
pub mod history;
pub mod model;
pub mod redis_cluster;
pub mod redis_sentinel;
pub mod redis_server;
pub mod rng;
pub mod spawned;
#[cfg(feature = "tls")]
pub mod tls;

pub use alloc::CountingAlloc;
pub use backend::Backend;
pub use delay_proxy::DelayProxy;
pub use redis_cluster::RedisCluster;
pub use redis_server::RedisServer;
pub use rng::SplitMix64;
pub use spawned::Spawned;
