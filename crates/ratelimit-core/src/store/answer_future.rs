//! [`AnswerFuture`]: an [`Answer`](crate::Answer) being awaited.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An [`Answer`](crate::Answer) being awaited: its value at the first
/// poll, or its future's.
///
/// ```
/// use ratelimit_core::store::AnswerFuture;
/// use ratelimit_core::{Gcra, MemoryStore, Store};
/// use std::future::IntoFuture;
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// // What `store.check(..).await` polls; async code never names it.
/// let _pending: AnswerFuture<_, _> = store.check("alice", 1, 0).into_future();
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct AnswerFuture<T, F>(State<T, F>);

/// What an [`AnswerFuture`] holds.
enum State<T, F> {
    Ready(T),
    Pending(F),
    /// The value, taken by a poll.
    Taken,
}

impl<T, F> AnswerFuture<T, F> {
    /// The future of an answer: its value (`Ok`) or its future (`Err`).
    #[inline]
    pub(super) fn new(answer: Result<T, F>) -> Self {
        Self(match answer {
            Ok(value) => State::Ready(value),
            Err(future) => State::Pending(future),
        })
    }
}

/// The value is never pinned (a poll moves it out); the future is pinned
/// in place, so the answer's future is `Unpin` when the future is.
impl<T, F: Unpin> Unpin for AnswerFuture<T, F> {}

impl<T, F: Future<Output = T>> Future for AnswerFuture<T, F> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // SAFETY: the future is pinned structurally. It is never moved out
        // of a pinned `AnswerFuture` (no method moves it), nor overwritten:
        // the state is replaced below only when it holds no future. The
        // value is not pinned, and moves out.
        #[allow(unsafe_code)]
        let this = unsafe { self.get_unchecked_mut() };
        if let State::Pending(future) = &mut this.0 {
            // SAFETY: as above, the future stays where it is until dropped.
            #[allow(unsafe_code)]
            let future = unsafe { Pin::new_unchecked(future) };
            return future.poll(cx);
        }
        match std::mem::replace(&mut this.0, State::Taken) {
            State::Ready(value) => Poll::Ready(value),
            _ => panic!("`AnswerFuture` polled after completion"),
        }
    }
}
