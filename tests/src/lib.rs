//! Cross-crate integration tests live in `tests/`: the example apps probed
//! as a client would.
//!
//! [`redis_server`] starts a private `redis-server` for the tests of the
//! examples on Redis; [`spawned`] runs an example binary and reads its logs.

pub mod redis_server;
pub mod spawned;
