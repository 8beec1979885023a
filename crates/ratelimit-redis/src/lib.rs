//! A Redis store for ratelimit-core: the same exact algorithms, shared by
//! every instance, one atomic round trip per check, and a failure policy
//! that keeps the service up when Redis is not.
//!
//! [`RedisStore`] implements [`ratelimit_core::Store`], so the HTTP layer
//! uses it exactly like the in-memory store, for any of the six
//! algorithms. Its decisions are identical to ratelimit-core's for the same
//! times, in every field of [`Decision`](ratelimit_core::Decision), as
//! [`docs/ALGORITHMS.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md)
//! defines them.
//!
//! ```no_run
//! use ratelimit_core::{SlidingWindow, Store};
//! use ratelimit_redis::{BreakerConfig, RedisStore};
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::builder("redis://127.0.0.1:6379/", SlidingWindow::new(1000, Duration::from_secs(3600))?)
//!     .prefix("myapp:rl:")
//!     .timeout(Duration::from_millis(25))
//!     .breaker(BreakerConfig { failure_threshold: 3, cool_down: Duration::from_millis(500) })
//!     .fallback_to_memory(50_000)
//!     .build()?;
//! let d = store.check("user:42", 1, 0).await?;
//! if !d.allowed {
//!     println!("retry after {:?}", d.retry_after());
//! }
//! # Ok(()) }
//! ```
//!
//! # One round trip, one clock
//!
//! Every check (and refund) is one `EVALSHA` of a Lua script that reads the
//! key's state, decides, and writes it back atomically. The script is
//! loaded when the connection is made and reloaded on `NOSCRIPT`. The time
//! is the server's `TIME`, read inside the script, so the instances'
//! clocks don't matter ([`TimeSource::Redis`], the default); tests and
//! fleets with synchronised clocks can pass the time instead
//! ([`TimeSource::Caller`]). `TIME` is the server's wall clock: should it
//! step back, GCRA and the buckets simply see more of the limit used, a
//! fixed window keeps its end, and the sliding window and log stay at
//! their latest window or entry instead of resetting.
//!
//! # Keys
//!
//! The key of `user:42` is `{prefix}{user:42}:{algorithm}:{fingerprint}`.
//! The braces make the caller's key the Redis Cluster hash tag, so all the
//! state of one key (for every limit on it) lives in one slot; the
//! fingerprint of the algorithm and its parameters keeps two limits on the
//! same key apart, and a changed limit starts afresh. Every check touches
//! that one key, so with the `cluster` feature a store on a
//! `redis::cluster::ClusterClient` (see [`Target`]) sends each check to
//! the node owning its slot (tested on a three-node cluster).
//!
//! Every key carries a TTL (`PX`): it vanishes about a second after its
//! state is back to full. The sliding log is a hash used as a deque,
//! holding at most `limit` entries, as in memory.
//!
//! # Exactness
//!
//! Lua numbers are doubles, exact only below 2^53, while a time is about
//! 1.7e18 ns since 1970 and GCRA's scaled time is that times `L /
//! gcd(L, P)`. The scripts never hold such a number:
//!
//! - a time is a pair (seconds, nanoseconds); only differences of times,
//!   bounded by the window, are formed as one number;
//! - a scaled quantity (GCRA, token and leaky bucket, where `T = P / L` is
//!   a whole number of `1/scale` ns) is a pair `(w, f)` = `w * scale + f`,
//!   with `w` whole nanoseconds and `0 <= f < scale`; sums, differences and
//!   small multiples carry between the parts, and `floor(x / T)` is a
//!   double estimate corrected by exact comparisons;
//! - `t mod P` is `((s mod P/g) * (1e9 mod P) + ns) mod P` with
//!   `g = gcd(P, 1e9)`, through an exact `mulmod` when the product is
//!   large, and the sliding window's `prev * (P - e)` against `room * P` is
//!   an exact `muldivmod` (quotient and remainder), never a rounded
//!   product;
//! - every division goes through `math.fmod`, which is exact.
//!
//! State is stored as decimal strings (`seconds:nanoseconds:rest`). This
//! holds while windows stay below 2^51 ns (26 days) and `limit` (burst,
//! queue) times `L / gcd(L, P)` below 2^51; [`RedisStoreBuilder::build`]
//! rejects anything larger rather than decide inexactly. The integration
//! tests compare every decision with ratelimit-core's on random traces at
//! real epoch times, including `3 per 1s` and `7 per 1s`.
//!
//! # When Redis fails
//!
//! - Every call has a short timeout ([`DEFAULT_TIMEOUT`], 50 ms), connecting
//!   included; reconnects run in the background.
//! - A circuit breaker ([`BreakerConfig`]) opens after consecutive
//!   failures; while open, calls don't touch Redis. After the cool-down one
//!   probe goes through (half-open); its success closes the breaker.
//!   Every change of state is logged with `tracing` (target
//!   `ratelimit_redis::breaker`) and, with the `metrics` feature, counted
//!   (`ratelimit_redis_breaker_transitions_total{from,to}`, gauge
//!   `ratelimit_redis_breaker_state`, `ratelimit_redis_fallback_total`,
//!   `ratelimit_redis_errors_total{kind}`).
//! - While Redis is unavailable, a check either decides in a local,
//!   bounded [`MemoryStore`](ratelimit_core::MemoryStore) of the same
//!   algorithm ([`RedisStoreBuilder::fallback_to_memory`]) or fails with
//!   [`StoreError::Backend`](ratelimit_core::StoreError::Backend), which the
//!   HTTP layer turns into fail-open (the default) or fail-closed (503).
//! - Redis answering with an error (a key of the wrong type, say) is a
//!   [`StoreError::Backend`](ratelimit_core::StoreError::Backend) naming
//!   it; it does not trip the breaker (Redis is up) and never falls back.

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod breaker;
mod conn;
mod plan;
mod store;

pub use breaker::{BreakerConfig, BreakerState};
pub use store::{
    RedisStore, RedisStoreBuilder, StoreFuture, Target, TimeSource, DEFAULT_PREFIX, DEFAULT_TIMEOUT,
};

use std::fmt;

/// Why a [`RedisStore`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The connection URL is invalid.
    Url(String),
    /// The key prefix contains `{` or `}`, which would break the Redis
    /// Cluster hash tag.
    Prefix(String),
    /// The algorithm's numbers exceed the range the scripts compute
    /// exactly in.
    Unsupported(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => write!(f, "bad redis url {e}"),
            Self::Prefix(p) => write!(f, "key prefix {p:?} must not contain braces"),
            Self::Unsupported(e) => write!(f, "not supported by the redis store: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}
