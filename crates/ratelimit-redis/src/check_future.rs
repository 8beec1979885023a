//! The future of a [`RedisStore`](crate::RedisStore)'s pending answers
//! (the deny cache's answers are ready, with no future).

use ratelimit_core::StoreError;
use std::future::Future;
use std::pin::Pin;

/// The future of a [`RedisStore`](crate::RedisStore) call that is pending.
///
/// ```
/// use ratelimit_core::{Answer, Decision, Gcra, Store};
/// use ratelimit_redis::{RedisStore, StoreFuture};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # // Nothing listens on port 1: the check runs on the fallback.
/// let store = RedisStore::builder("redis://127.0.0.1:1/", Gcra::new(5, Duration::from_secs(1))?)
///     .fallback_to_memory(1_000)
///     .build()?;
/// let answer: Answer<_, StoreFuture<Decision>> = store.check("alice", 1, 0);
/// assert!(!answer.is_ready());
/// assert!(answer.await?.allowed);
/// # Ok(())
/// # }
/// ```
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;
