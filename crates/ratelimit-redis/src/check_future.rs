//! The future of a [`RedisStore`](crate::RedisStore)'s pending answers
//! (the deny cache's answers are ready, with no future).

use ratelimit_core::StoreError;
use std::future::Future;
use std::pin::Pin;

/// The future of a [`RedisStore`](crate::RedisStore) call that is pending.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;
