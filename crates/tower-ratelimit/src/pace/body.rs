//! [`PacedBody`]: a body that yields its data no faster than its key's budget allows.

use super::meter::Meter;
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// A request or response body paced by a
    /// [`PaceLayer`](super::PaceLayer).
    ///
    /// ```
    /// use axum::body::Body;
    /// use http::{Request, Response};
    /// use http_body_util::BodyExt;
    /// use std::{convert::Infallible, time::Duration};
    /// use tower::{Layer, ServiceExt};
    /// use tower_ratelimit::pace::PaceLayer;
    /// use tower_ratelimit::{key::Global, MemoryStore, TokenBucket};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let bytes = TokenBucket::new(1024, 1024, Duration::from_secs(1)).unwrap();
    /// let pace = PaceLayer::builder("download", MemoryStore::new(bytes), Global, 256)
    ///     .build()
    ///     .unwrap();
    /// let inner = tower::service_fn(|_: Request<_>| async {
    ///     Ok::<_, Infallible>(Response::new(Body::from(vec![0u8; 100])))
    /// });
    /// let res = pace.layer(inner).oneshot(Request::new(Body::empty())).await.unwrap();
    /// assert!(res.body().is_paced());
    /// let sent = res.into_body().collect().await.unwrap().to_bytes();
    /// assert_eq!(sent.len(), 100);
    /// # }
    /// ```
    ///
    /// Each data frame is cut into pieces
    /// of at most the layer's piece size, and each piece is yielded once
    /// the key's budget admits its bytes (a denial sleeps its
    /// `retry_after`, then tries again). Trailers pass as they are. A body
    /// the layer does not pace (another direction, a key error let
    /// through) passes its frames unchanged.
    ///
    /// Dropping the body (a client that disconnects) stops its charges:
    /// only pieces already yielded were charged, as was a piece whose
    /// check was in flight on a remote store.
    pub struct PacedBody<B> {
        #[pin]
        inner: B,
        meter: Option<Box<Meter>>,
    }
}

impl<B> PacedBody<B> {
    pub(crate) fn paced(inner: B, meter: Meter) -> Self {
        Self {
            inner,
            meter: Some(Box::new(meter)),
        }
    }

    /// `inner`, unpaced.
    pub fn unpaced(inner: B) -> Self {
        Self { inner, meter: None }
    }

    /// Whether the body is paced.
    pub fn is_paced(&self) -> bool {
        self.meter.is_some()
    }

    /// The inner body, if the body is not paced (so that an app can hand
    /// it on as it came: an axum `Body` keeps its own errors, such as a
    /// length limit's); a paced body back as it is.
    pub fn into_unpaced(self) -> Result<B, Self> {
        match self.meter {
            None => Ok(self.inner),
            Some(_) => Err(self),
        }
    }
}

impl<B: Body> Body for PacedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        loop {
            if let Some(meter) = this.meter.as_mut().filter(|m| !m.is_idle()) {
                let piece = ready!(meter.poll_piece(cx));
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            let frame = match ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            };
            match (frame.into_data(), this.meter.as_mut()) {
                (Ok(mut data), Some(meter)) => meter.load(data.copy_to_bytes(data.remaining())),
                (Ok(mut data), None) => {
                    return Poll::Ready(Some(Ok(Frame::data(data.copy_to_bytes(data.remaining())))))
                }
                (Err(frame), _) => return Poll::Ready(Some(Ok(frame.map_data(to_bytes)))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.meter.as_ref().is_none_or(|m| m.is_idle()) && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let held = self.meter.as_ref().map_or(0, |m| m.held());
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(held));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint
    }
}

/// A frame's data as `Bytes` (free for `Bytes` itself).
fn to_bytes<D: Buf>(mut data: D) -> Bytes {
    data.copy_to_bytes(data.remaining())
}
