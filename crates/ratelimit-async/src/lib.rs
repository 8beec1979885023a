//! Rate limits for any async code, on the stores of
//! [`ratelimit-core`](ratelimit_core) (memory) and `ratelimit-redis`.
//!
//! - [`Limiter`]: a store and a clock. [`check`](Limiter::check) decides
//!   now; [`until_ready`](Limiter::until_ready) sleeps exactly the
//!   decision's wait on tokio's timer, then takes the permit (cancel-safe,
//!   optional jitter).
//! - [`Limiter::pace`]: a [`Stream`](futures_core::Stream) adapter that
//!   passes items at each key's rate ([`PacedStream`]).
//! - With the `client` feature, the `client` module: a tower layer for outgoing
//!   HTTP requests that paces them per host (or any key), obeys
//!   `Retry-After` and the IETF `RateLimit` fields, and retries idempotent
//!   requests with capped exponential backoff, full jitter and a budget.
//!
//! ```
//! use futures_util::StreamExt;
//! use ratelimit_async::Limiter;
//! use ratelimit_core::{Gcra, MemoryStore};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Jobs from many tenants, 50 per second per tenant.
//! let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(50, Duration::from_secs(1), 1)?));
//! let jobs = futures_util::stream::iter([("a", 1), ("a", 2), ("b", 1)]);
//! let mut paced = limiter.pace(jobs, 1024, |job: &(&str, i32)| job.0.to_string());
//! while let Some(job) = paced.next().await {
//!     let (tenant, n) = job?;
//!     println!("{tenant}: job {n}");
//! }
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "client")]
pub mod client;
mod jitter;
mod limiter;
mod queue;
mod stream;

pub use limiter::{Limiter, WaitError};
pub use stream::{PacedStream, Rejected};
