//! [`NeverPending`]: the pending future of a store that always answers
//! at once.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of a store that always answers at once: no value of it
/// exists, so an [`Answer`](crate::Answer) with it is always ready, and
/// [`Answer::value`](crate::Answer::value) takes the value without a
/// `Result`.
///
/// ```
/// use ratelimit_core::{store::NeverPending, Answer};
///
/// let answer: Answer<u64, NeverPending<u64>> = Answer::ready(7);
/// assert_eq!(answer.value(), 7);
/// ```
pub struct NeverPending<T> {
    never: Infallible,
    output: PhantomData<fn() -> T>,
}

impl<T> NeverPending<T> {
    /// Whatever the caller needs: this code cannot run.
    #[inline(always)]
    pub(crate) fn unreachable<U>(&self) -> U {
        match self.never {}
    }
}

impl<T> Future for NeverPending<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<T> {
        self.unreachable()
    }
}

impl<T> fmt::Debug for NeverPending<T> {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.unreachable()
    }
}
