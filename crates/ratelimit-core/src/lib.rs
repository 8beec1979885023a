//! Exact rate-limiting algorithms and a fast, bounded in-memory store.
//!
//! Six algorithms — [`Gcra`], [`TokenBucket`], [`LeakyBucket`],
//! [`FixedWindow`], [`SlidingLog`] and [`SlidingWindow`] — decide exactly
//! as the contract says, to the last nanosecond: no floats, no rounding of
//! `P / L`, no drift. The contract,
//! [`docs/ALGORITHMS.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md),
//! defines every algorithm to its last boundary, with worked examples, the
//! meaning of every field of a [`Decision`], refunds, and how the HTTP
//! `RateLimit` fields are derived. The algorithms share one [`Algorithm`]
//! trait, so a store or an HTTP layer handles any of them alike, and
//! [`AnyAlgorithm`] picks one at run time.
//!
//! The algorithm decides, the store ([`MemoryStore`]) owns atomicity and
//! memory, and the clock ([`Clock`]) is passed in.
//!
//! The root holds what an app names: the algorithms, the stores, the
//! clocks, [`Decision`] and the errors. Three modules hold the rest:
//! [`algorithm`] the algorithms' options, states and key hashing,
//! [`store`] the stores' options, futures and counts, and [`plumbing`]
//! what the sibling crates share.
//!
//! ```
//! use ratelimit_core::{Clock, Gcra, ManualClock, MemoryStore, Store};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let store = MemoryStore::new(Gcra::new(5, Duration::from_secs(60)).unwrap());
//! for _ in 0..5 {
//!     assert!(store.check("10.0.0.1", 1, clock.now()).value().unwrap().allowed);
//! }
//! let denied = store.check("10.0.0.1", 1, clock.now()).value().unwrap();
//! assert_eq!(denied.retry_after(), Some(Duration::from_secs(12)));
//! # let _: &MemoryStore<Gcra, String> = &store;
//! ```

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod algorithm;
mod clock;
mod decision;
mod error;
pub mod plumbing;
pub mod store;
#[cfg(feature = "tokio")]
mod tokio_clock;

pub use algorithm::any::AnyAlgorithm;
pub use algorithm::fixed_window::FixedWindow;
pub use algorithm::gcra::Gcra;
pub use algorithm::leaky_bucket::LeakyBucket;
#[cfg(feature = "live")]
pub use algorithm::live::LiveAlgorithm;
pub use algorithm::sliding_log::SlidingLog;
pub use algorithm::sliding_window::SlidingWindow;
pub use algorithm::spec::SpecError;
pub use algorithm::token_bucket::TokenBucket;
pub use algorithm::Algorithm;
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::Decision;
pub use error::{ConfigError, StoreError};
pub use store::answer::Answer;
pub use store::ban::BanPolicy;
pub use store::boxed::BoxStore;
pub use store::memory::MemoryStore;
pub use store::Store;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;
