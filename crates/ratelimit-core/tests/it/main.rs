//! The integration tests of `ratelimit-core`, in one binary: property tests
//! of every algorithm against reference models, boundary cases, the worked
//! example, concurrency, eviction under a flood, the idle-horizon sweep, the
//! hot slot, validation, and reserve-then-settle with debt. (The memory
//! test, which needs a counting global allocator, is `tests/memory.rs`.)

mod ban;
mod boundaries;
mod boxed;
mod calendar;
mod capacity;
mod concurrency;
mod eviction;
mod example;
mod harness;
mod history;
mod horizon;
mod hot;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "live")]
mod live_props;
mod model;
mod now;
mod props;
mod reset;
mod settle;
mod spec;
mod validation;
