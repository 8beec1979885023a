//! The futures of a [`RedisStore`](crate::RedisStore)'s calls: a check's,
//! ready at once when the deny cache answers, and every other call's.

use ratelimit_core::{Decision, StoreError};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of a [`RedisStore`](crate::RedisStore) call.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// The future of a [`RedisStore`](crate::RedisStore) check: ready at once
/// when the deny cache answers, else a round trip.
pub struct CheckFuture(CheckState);

enum CheckState {
    Ready(Option<Result<Decision, StoreError>>),
    Pending(StoreFuture<Decision>),
}

impl CheckFuture {
    /// A check answered already.
    pub(crate) fn ready(answer: Result<Decision, StoreError>) -> Self {
        Self(CheckState::Ready(Some(answer)))
    }

    /// A check still to run.
    pub(crate) fn pending(
        work: impl Future<Output = Result<Decision, StoreError>> + Send + 'static,
    ) -> Self {
        Self(CheckState::Pending(Box::pin(work)))
    }
}

impl Future for CheckFuture {
    type Output = Result<Decision, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            CheckState::Ready(answer) => Poll::Ready(answer.take().unwrap_or_else(|| {
                Err(StoreError::unavailable(
                    "other",
                    "check polled after completion",
                ))
            })),
            CheckState::Pending(f) => f.as_mut().poll(cx),
        }
    }
}

impl fmt::Debug for CheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            CheckState::Ready(_) => "CheckFuture(ready)",
            CheckState::Pending(_) => "CheckFuture(pending)",
        })
    }
}
