//! One accepted connection served to its end (`ConnectionTask`), each
//! request counted in flight until its response body is dropped.

use super::accept_loop::BoxError;
use super::activity::{Activity, TrackedBody};
use super::closed::{closed, CLOSED_IDLE};
use super::drive::{drive, Ended};
use super::registry::Entry;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tower::{Service, ServiceExt};

/// One accepted connection and what it holds until it closes.
pub(super) struct ConnectionTask {
    pub(super) entry: Entry,
    pub(super) slot: OwnedSemaphorePermit,
    pub(super) idle_timeout: Duration,
    pub(super) stopped: watch::Receiver<bool>,
}

impl ConnectionTask {
    /// Serves `stream` with `svc`, counting each request in flight until
    /// its response body is dropped.
    pub(super) fn serve<S, B>(
        self,
        http: auto::Builder<TokioExecutor>,
        stream: TcpStream,
        peer: SocketAddr,
        svc: S,
    ) -> impl Future<Output = ()> + Send
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let activity: Arc<Activity> = Arc::clone(&self.entry.activity);
        let tracked = hyper::service::service_fn(move |req: Request<Incoming>| {
            let in_flight = activity.begin();
            let call = svc.clone().oneshot(req);
            async move {
                let res = call.await.map_err(|e| Failed(e.into()))?;
                Ok::<_, Failed>(res.map(|body| TrackedBody::new(body, in_flight)))
            }
        });
        async move {
            let conn = http.serve_connection(TokioIo::new(stream), tracked);
            let mut conn = std::pin::pin!(conn);
            let ended = drive(
                conn.as_mut(),
                |c| c.graceful_shutdown(),
                &self.entry.activity,
                self.idle_timeout,
                self.stopped,
            )
            .await;
            match ended {
                Ended::Done(Ok(())) => {}
                Ended::Done(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "connection closed on an error");
                }
                Ended::Idle => {
                    closed(CLOSED_IDLE, 1);
                    tracing::debug!(%peer, "idle connection closed");
                }
                Ended::Shed => tracing::debug!(%peer, "idle connection shed"),
            }
            drop(self.slot);
        }
    }
}

/// A service's error, as hyper takes it. (A boxed error as such trips
/// the compiler's proof that the connection's future is `Send`.)
#[derive(Debug)]
struct Failed(BoxError);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
