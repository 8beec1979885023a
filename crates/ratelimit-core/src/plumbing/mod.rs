//! What the sibling crates (tower-ratelimit, ratelimit-redis, ratelimit-sim,
//! ratelimit-server) share, public so that they can use it: durations as
//! text and their roundings, the rule for a limit's name, a gate for log
//! lines, and the entries an admin API shares between instances. An app
//! rarely names any of it.
//!
//! ```
//! use ratelimit_core::plumbing::{format_duration, is_valid_limit_name, parse_duration};
//! use std::time::Duration;
//!
//! assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
//! assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
//! assert!(is_valid_limit_name("per-ip"));
//! ```

mod duration;
mod limit_name;
mod log_throttle;
mod shared_entries;

pub use duration::{ceil_secs, format_duration, parse_duration, saturating_nanos};
pub use limit_name::{is_valid_limit_name, LIMIT_NAME_RULE};
pub use log_throttle::LogThrottle;
pub use shared_entries::{
    EntriesFuture, EntriesSink, EntryDigest, EntryTable, SharedEntries, SharedEntry,
};

pub(crate) use duration::parse_fine_duration;
