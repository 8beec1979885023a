//! [`Answer`]: what a store gives back for an operation, ready now or
//! still pending.

use super::{AnswerFuture, NeverPending};
use std::fmt;
use std::future::{Future, IntoFuture};

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
/// it is (it is [`IntoFuture`]). An answer that cannot be pending has
/// the layout of its value, so taking it copies nothing.
#[must_use = "a pending answer does nothing unless it is awaited"]
pub struct Answer<T, F>(Result<T, F>);

impl<T, F> Answer<T, F> {
    /// An answer ready now.
    #[inline(always)]
    pub fn ready(value: T) -> Self {
        Self(Ok(value))
    }

    /// An answer still to come from `future`.
    #[inline]
    pub fn pending(future: F) -> Self {
        Self(Err(future))
    }

    /// Whether the value is ready now.
    #[inline]
    pub fn is_ready(&self) -> bool {
        self.0.is_ok()
    }

    /// The value if it is ready (`Ok`), else the future to await (`Err`).
    #[inline(always)]
    pub fn into_ready(self) -> Result<T, F> {
        self.0
    }

    /// The same answer with its pending future mapped by `f` (to box it,
    /// say); a ready value is kept as it is.
    #[inline(always)]
    pub fn map_pending<G>(self, f: impl FnOnce(F) -> G) -> Answer<T, G> {
        Answer(self.0.map_err(f))
    }
}

impl<T> Answer<T, NeverPending<T>> {
    /// The value of an answer that cannot be pending (a store that always
    /// answers at once, as [`MemoryStore`](crate::MemoryStore) does).
    #[inline(always)]
    pub fn value(self) -> T {
        match self.0 {
            Ok(value) => value,
            Err(never) => never.unreachable(),
        }
    }
}

/// Awaiting an answer awaits its future, or gives its value at once.
impl<T, F: Future<Output = T>> IntoFuture for Answer<T, F> {
    type Output = T;
    type IntoFuture = AnswerFuture<T, F>;

    #[inline]
    fn into_future(self) -> AnswerFuture<T, F> {
        AnswerFuture::new(self.0)
    }
}

impl<T: fmt::Debug, F> fmt::Debug for Answer<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Ok(value) => f.debug_tuple("Ready").field(value).finish(),
            Err(_) => f.write_str("Pending"),
        }
    }
}
