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

mod algorithm;
mod calendar;
mod clock;
mod decision;
mod duration;
mod error;
mod limit_name;
mod log_throttle;
mod shared_entries;
mod spec;
mod store;
#[cfg(feature = "tokio")]
mod tokio_clock;

pub use algorithm::{
    stable_hash, Algorithm, Anchor, AnyAlgorithm, AnyGcra, AnyLeakyBucket, AnyState,
    AnyTokenBucket, FixedWindow, Gcra, LeakyBucket, LogState, SlidingLog, SlidingWindow,
    SlidingWindowState, StableHasher, StableKey, StateWord, TokenBucket, WindowState,
    DEFAULT_MAX_LOG_ENTRIES,
};
#[cfg(feature = "live")]
pub use algorithm::{LiveAlgorithm, LiveError, LiveState, MAX_OVERRIDES};
pub use calendar::CalendarUnit;
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::Decision;
pub use duration::{ceil_secs, format_duration, parse_duration, saturating_nanos};
pub use error::{ConfigError, RemoteError, StoreError};
pub use limit_name::{is_valid_limit_name, LIMIT_NAME_RULE};
pub use log_throttle::LogThrottle;
pub use shared_entries::{
    EntriesFuture, EntriesSink, EntryDigest, EntryTable, SharedEntries, SharedEntry,
};
pub use spec::SpecError;
pub use store::{
    Answer, AtCapacity, BanLeftFuture, BanPolicy, BoxStore, MemoryStore, MemoryStoreBuilder,
    NeverPending, SettleFuture, Store, StoreCounts, Upkeep,
};
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;
