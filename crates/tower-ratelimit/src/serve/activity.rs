//! What one connection is doing: its requests in flight, since when it
//! has been idle, and whether it was shed.

use pin_project_lite::pin_project;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's activity, shared by its requests (which count
/// themselves in and out), its driver (which closes it when idle too long)
/// and the [`Registry`](super::registry::Registry) (which sheds the oldest
/// idle connections under pressure).
///
/// A request is in flight from the call of the service until its response
/// body is dropped: a long download is not idle.
#[derive(Debug)]
pub(crate) struct Activity {
    base: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds from `base` to when the last request ended (or the
    /// connection was accepted).
    idle_since: AtomicU64,
    shed: AtomicBool,
    /// Woken when the last request in flight ends and when shed.
    wake: Notify,
}

impl Activity {
    /// A connection accepted now, idle until its first request. `base` is
    /// the server's start: the clock the idle times count on.
    pub(crate) fn new(base: Instant) -> Self {
        Self {
            base,
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(nanos(base)),
            shed: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    /// A request begins; it ends when the guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// Since when no request has been in flight; `None` while one is.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let ns = self.idle_since.load(Ordering::Acquire);
        Some(self.base + Duration::from_nanos(ns))
    }

    /// Marks the connection to be closed at once; `false` if it already
    /// was.
    pub(crate) fn shed(&self) -> bool {
        let first = !self.shed.swap(true, Ordering::AcqRel);
        if first {
            self.wake.notify_one();
        }
        first
    }

    /// Whether [`shed`](Self::shed) was called.
    pub(crate) fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }

    /// Completes when the last request in flight ends or the connection
    /// is shed (a wake-up that came first is kept).
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }
}

fn nanos(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A request in flight on a connection, counted out when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        // The time first, so a reader that sees no request in flight sees
        // when the last one ended.
        activity
            .idle_since
            .fetch_max(nanos(activity.base), Ordering::AcqRel);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.wake.notify_one();
        }
    }
}

pin_project! {
    /// A response body that keeps its request in flight until dropped.
    #[derive(Debug)]
    pub(crate) struct TrackedBody<B> {
        #[pin]
        inner: B,
        in_flight: InFlight,
    }
}

impl<B> TrackedBody<B> {
    pub(crate) fn new(inner: B, in_flight: InFlight) -> Self {
        Self { inner, in_flight }
    }
}

impl<B: hyper::body::Body> hyper::body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_from_the_end_of_the_last_request() {
        let base = Instant::now();
        let activity = Arc::new(Activity::new(base));
        assert_eq!(activity.idle_since(), Some(base));
        tokio::time::advance(Duration::from_secs(3)).await;
        let (a, b) = (activity.begin(), activity.begin());
        assert_eq!(activity.idle_since(), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        drop(a);
        assert_eq!(activity.idle_since(), None, "one still in flight");
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(b);
        assert_eq!(activity.idle_since(), Some(base + Duration::from_secs(6)));
        // The end of the last request woke the driver.
        activity.changed().await;
        assert!(!activity.is_shed());
        assert!(activity.shed());
        assert!(!activity.shed(), "shed once");
        activity.changed().await;
        assert!(activity.is_shed());
    }
}
