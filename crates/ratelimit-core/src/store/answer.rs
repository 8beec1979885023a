//! [`Answer`]: what a store gives back for an operation, ready now or
//! still pending.

use super::NeverPending;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A store's answer: the value, ready now, or a future `F` to await.
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap());
/// // A memory store always answers at once: no future, no polling.
/// assert!(store.check("alice", 1, 0).value().unwrap().allowed);
/// // Any store: take a ready answer, or await the pending one.
/// match store.check("alice", 1, 0).into_ready() {
///     Ok(decided) => assert!(!decided.unwrap().allowed),
///     Err(_pending) => unreachable!("awaited in async code"),
/// }
/// # let _: &MemoryStore<Gcra, String> = &store;
/// ```
///
/// A caller on a hot path takes the ready value without polling
/// ([`into_ready`](Self::into_ready)); async code awaits the answer as
/// it is, as it is a future too.
#[must_use = "a pending answer does nothing unless it is awaited"]
pub struct Answer<T, F>(State<T, F>);

/// What an [`Answer`] holds.
enum State<T, F> {
    Ready(T),
    Pending(F),
    /// The value, taken by a poll.
    Taken,
}

impl<T, F> Answer<T, F> {
    /// An answer ready now.
    #[inline(always)]
    pub fn ready(value: T) -> Self {
        Self(State::Ready(value))
    }

    /// An answer still to come from `future`.
    #[inline]
    pub fn pending(future: F) -> Self {
        Self(State::Pending(future))
    }

    /// Whether the value is ready now.
    #[inline]
    pub fn is_ready(&self) -> bool {
        matches!(self.0, State::Ready(_))
    }

    /// The value if it is ready (`Ok`), else the future to await (`Err`).
    ///
    /// # Panics
    ///
    /// On an answer already polled to completion as a future.
    #[inline(always)]
    pub fn into_ready(self) -> Result<T, F> {
        match self.0 {
            State::Ready(value) => Ok(value),
            State::Pending(future) => Err(future),
            State::Taken => taken(),
        }
    }

    /// The same answer with its pending future mapped by `f` (to box it,
    /// say); a ready value is kept as it is.
    #[inline(always)]
    pub fn map_pending<G>(self, f: impl FnOnce(F) -> G) -> Answer<T, G> {
        match self.into_ready() {
            Ok(value) => Answer::ready(value),
            Err(future) => Answer::pending(f(future)),
        }
    }
}

impl<T> Answer<T, NeverPending<T>> {
    /// The value of an answer that cannot be pending (a store that always
    /// answers at once, as [`MemoryStore`](crate::MemoryStore) does).
    #[inline(always)]
    pub fn value(self) -> T {
        match self.0 {
            State::Ready(value) => value,
            State::Pending(never) => never.unreachable(),
            State::Taken => taken(),
        }
    }
}

/// The value is never pinned (a poll moves it out); the future is pinned
/// in place, so the answer is `Unpin` when the future is.
/// The panic of an answer used after a poll took its value.
#[cold]
#[inline(never)]
fn taken() -> ! {
    panic!("`Answer` used after it was polled to completion")
}

impl<T, F: Unpin> Unpin for Answer<T, F> {}

impl<T, F: Future<Output = T>> Future for Answer<T, F> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // SAFETY: the future is pinned structurally. It is never moved out
        // of a pinned answer (only methods that take the answer by value
        // move it, and a pinned answer is not `Unpin` unless the future
        // is), nor overwritten: the state is replaced below only when it
        // holds no future. The value is not pinned, and moves out.
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
            _ => panic!("`Answer` polled after completion"),
        }
    }
}

impl<T: fmt::Debug, F> fmt::Debug for Answer<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            State::Ready(value) => f.debug_tuple("Ready").field(value).finish(),
            State::Pending(_) => f.write_str("Pending"),
            State::Taken => f.write_str("Taken"),
        }
    }
}
