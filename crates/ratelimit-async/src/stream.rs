//! [`PacedStream`]: a stream whose items pass at each key's rate.

use crate::{Limiter, WaitError};
use futures_core::Stream;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use pin_project_lite::pin_project;
use ratelimit_core::Store;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An item [`PacedStream`] could not pass: the item itself and why.
///
/// ```
/// use ratelimit_async::{Rejected, WaitError};
///
/// let rejected = Rejected { item: "job-7", error: WaitError::Never { cost: 1, limit: 0 } };
/// assert_eq!(rejected.item, "job-7");
/// assert!(rejected.to_string().starts_with("item not admitted"));
/// ```
#[derive(Debug)]
pub struct Rejected<T> {
    /// The item, handed back.
    pub item: T,
    /// Why it was not admitted.
    pub error: WaitError,
}

impl<T> fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "item not admitted: {}", self.error)
    }
}

impl<T: fmt::Debug> std::error::Error for Rejected<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

type Wait<K> = Pin<Box<dyn Future<Output = (K, Result<(), WaitError>)> + Send>>;

pin_project! {
    /// A stream that passes each item when its key's limit admits it
    /// (cost 1): made by [`Limiter::pace`].
    ///
    /// ```
    /// use futures_util::{stream, StreamExt};
    /// use ratelimit_async::Limiter;
    /// use ratelimit_core::{Gcra, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limiter = Limiter::new(MemoryStore::new(Gcra::new(1, Duration::from_secs(1)).unwrap()));
    /// let jobs = stream::iter(["a1", "a2", "b1"]);
    /// // Keyed by the first letter: "b1" need not wait for "a2".
    /// let paced = limiter.pace(jobs, 8, |job: &&str| job[..1].to_string());
    /// let out: Vec<_> = paced.map(Result::unwrap).collect().await;
    /// assert_eq!(out.len(), 3);
    /// assert_eq!(out.last(), Some(&"a2"));
    /// # }
    /// ```
    ///
    /// It reads up to `buffer` items ahead, queued per key: items of one
    /// key come out in their order, and a key that is out of quota does
    /// not hold up the others while the buffer has room. A key waits on
    /// one timer for the head of its queue, so memory is bounded by
    /// `buffer` items and keys. An item that can never be admitted, or
    /// whose check failed, comes out as `Err(Rejected)` in its turn.
    pub struct PacedStream<St: Stream, K, S, F> {
        #[pin]
        stream: St,
        done: bool,
        limiter: Limiter<K, S>,
        key_of: F,
        buffer: usize,
        buffered: usize,
        queues: HashMap<K, VecDeque<St::Item>>,
        waits: FuturesUnordered<Wait<K>>,
    }
}

impl<St, K, S, F> fmt::Debug for PacedStream<St, K, S, F>
where
    St: Stream,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacedStream")
            .field("buffer", &self.buffer)
            .field("buffered", &self.buffered)
            .field("keys", &self.queues.len())
            .finish_non_exhaustive()
    }
}

impl<K, S> Limiter<K, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    S: Store<K>,
{
    /// Paces `stream`: each item passes when `key_of(&item)`'s limit admits
    /// one more, reading up to `buffer` items ahead (at least 1; with 1,
    /// items pass strictly in order, one key at a time).
    ///
    /// The adapter is `Unpin` when `stream` is; otherwise pin it
    /// (`std::pin::pin!`) before calling `next`.
    pub fn pace<St, F>(&self, stream: St, buffer: usize, key_of: F) -> PacedStream<St, K, S, F>
    where
        St: Stream,
        F: FnMut(&St::Item) -> K,
    {
        PacedStream {
            stream,
            done: false,
            limiter: self.clone(),
            key_of,
            buffer: buffer.max(1),
            buffered: 0,
            queues: HashMap::new(),
            waits: FuturesUnordered::new(),
        }
    }
}

fn wait_for<K, S>(limiter: &Limiter<K, S>, key: K) -> Wait<K>
where
    K: Hash + Send + Sync + 'static,
    S: Store<K>,
{
    let limiter = limiter.clone();
    Box::pin(async move {
        let result = limiter.until_ready(&key, 1).await.map(drop);
        (key, result)
    })
}

impl<St, K, S, F> Stream for PacedStream<St, K, S, F>
where
    St: Stream,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    S: Store<K>,
    F: FnMut(&St::Item) -> K,
{
    type Item = Result<St::Item, Rejected<St::Item>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        // Read ahead while there is room.
        while !*this.done && *this.buffered < *this.buffer {
            match this.stream.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    let key = (this.key_of)(&item);
                    *this.buffered += 1;
                    match this.queues.get_mut(&key) {
                        Some(queue) => queue.push_back(item),
                        None => {
                            this.waits.push(wait_for(this.limiter, key.clone()));
                            this.queues.insert(key, VecDeque::from([item]));
                        }
                    }
                }
                Poll::Ready(None) => *this.done = true,
                Poll::Pending => break,
            }
        }
        match this.waits.poll_next_unpin(cx) {
            Poll::Ready(Some((key, result))) => {
                let Some(queue) = this.queues.get_mut(&key) else {
                    unreachable!("a wait runs only for a key with a queue")
                };
                let item = queue.pop_front().expect("a key's queue is never empty");
                if queue.is_empty() {
                    this.queues.remove(&key);
                } else {
                    this.waits.push(wait_for(this.limiter, key));
                }
                // The freed room is read into on the next poll.
                *this.buffered -= 1;
                Poll::Ready(Some(match result {
                    Ok(()) => Ok(item),
                    Err(error) => Err(Rejected { item, error }),
                }))
            }
            Poll::Ready(None) if *this.done => Poll::Ready(None),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.stream.size_hint();
        (
            lo.saturating_add(self.buffered),
            hi.and_then(|h| h.checked_add(self.buffered)),
        )
    }
}
