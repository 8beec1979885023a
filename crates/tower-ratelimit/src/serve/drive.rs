//! Drives one connection to its end: closes it when it has had no request
//! in flight for the idle timeout, drops it at once when shed, and closes
//! it gracefully on shutdown.

use super::activity::Activity;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// How long a connection closed for idleness gets to say goodbye (an
/// HTTP/2 `GOAWAY`) before it is dropped.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Why [`drive`] stopped polling a connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended<E> {
    /// The connection's future completed (not closed for idleness).
    Done(Result<(), E>),
    /// Closed for idleness: gracefully, or dropped if it lingered.
    Idle,
    /// Shed: dropped at once.
    Shed,
}

/// Polls `conn` until it ends. With no request in flight for
/// `idle_timeout`, `close` (a graceful shutdown) is called on it, and it is
/// dropped if still open [`CLOSE_GRACE`] later; shed, it is dropped at
/// once; when `shutdown` turns true, `close` is called and it may finish.
pub(crate) async fn drive<C, E>(
    mut conn: Pin<&mut C>,
    close: impl Fn(Pin<&mut C>),
    activity: &Activity,
    idle_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> Ended<E>
where
    C: Future<Output = Result<(), E>>,
{
    let mut shutting_down = false;
    let mut dropping_at: Option<Instant> = None;
    loop {
        if activity.is_shed() {
            return Ended::Shed;
        }
        let idle_at = activity.idle_since().map(|since| since + idle_timeout);
        let wake_at = match (dropping_at, shutting_down) {
            (Some(at), _) => Some(at),
            (None, true) => None,
            (None, false) => idle_at,
        };
        tokio::select! {
            biased;
            result = conn.as_mut() => {
                return match dropping_at {
                    Some(_) => Ended::Idle,
                    None => Ended::Done(result),
                };
            }
            () = activity.changed() => {}
            _ = shutdown.wait_for(|&stop| stop), if !shutting_down => {
                shutting_down = true;
                if dropping_at.is_none() {
                    close(conn.as_mut());
                }
            }
            () = sleep_until(wake_at.unwrap_or_else(Instant::now)), if wake_at.is_some() => {
                if dropping_at.is_some() {
                    return Ended::Idle;
                }
                // Still idle (no request began meanwhile)?
                if idle_at.is_some_and(|at| at <= Instant::now())
                    && activity.idle_since().is_some()
                {
                    close(conn.as_mut());
                    dropping_at = Some(Instant::now() + CLOSE_GRACE);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A connection that never ends by itself; `close` ends it only if
    /// `obeys`.
    struct Fake {
        closed: bool,
        obeys: bool,
    }

    impl Future for Fake {
        type Output = Result<(), ()>;
        fn poll(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Self::Output> {
            if self.closed && self.obeys {
                std::task::Poll::Ready(Ok(()))
            } else {
                std::task::Poll::Pending
            }
        }
    }

    fn close(mut c: Pin<&mut Fake>) {
        c.closed = true;
    }

    const IDLE: Duration = Duration::from_secs(10);

    /// Drives a fake connection that obeys `close` or not, with the
    /// server stopping already or not.
    async fn drive_fake(activity: &Activity, obeys: bool, stopping: bool) -> Ended<()> {
        let (_tx, rx) = watch::channel(stopping);
        let mut fake = std::pin::pin!(Fake {
            closed: false,
            obeys,
        });
        drive(fake.as_mut(), close, activity, IDLE, rx).await
    }

    #[tokio::test(start_paused = true)]
    async fn closes_after_the_idle_timeout_counted_from_the_last_request() {
        let start = Instant::now();
        let activity = Arc::new(Activity::new(start));
        let a = Arc::clone(&activity);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let request = a.begin();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(request);
        });
        assert_eq!(drive_fake(&activity, true, false).await, Ended::Idle);
        // The request ran from 5 s to 35 s: closed 10 s after its end.
        assert_eq!(start.elapsed(), Duration::from_secs(45));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ignores_the_close_is_dropped() {
        let start = Instant::now();
        let activity = Activity::new(start);
        assert_eq!(drive_fake(&activity, false, false).await, Ended::Idle);
        assert_eq!(start.elapsed(), IDLE + CLOSE_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn shed_drops_at_once_and_shutdown_closes_gracefully() {
        let start = Instant::now();
        let activity = Arc::new(Activity::new(start));
        let a = Arc::clone(&activity);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            a.shed();
        });
        assert_eq!(drive_fake(&activity, false, false).await, Ended::Shed);
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        // Stopping, with a request in flight: closed at once all the same.
        let activity = Arc::new(Activity::new(Instant::now()));
        let _busy = activity.begin();
        assert_eq!(drive_fake(&activity, true, true).await, Ended::Done(Ok(())));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }
}
