//! The `ratelimit-sim` command as a library: option parsing, trace parsing
//! and replay, so tests run the same code paths as the binary.
//!
//! `ratelimit-sim ALGORITHM [OPTIONS]` reads lines `T_MS KEY [COST]` on
//! standard input and writes `T_MS KEY allow|deny REMAINING WAIT_MS` for
//! each, deciding through [`ratelimit_core::MemoryStore`] on a manual clock.

mod options;
mod replay;
mod trace;

pub use options::{parse_algorithm, usage, SimError};
pub use replay::{format_decision, replay, Replayer};
pub use trace::{parse_line, Event};
