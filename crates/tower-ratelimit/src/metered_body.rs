//! [`MeteredBody`]: a response body that reports its cost to the request's [`CostReport`] as it streams.

use crate::cost_from::CostFrom;
use crate::cost_report::CostReport;
use crate::decimal::decimal;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project! {
    /// A response body that feeds the request's [`CostReport`] as it is
    /// sent: with [`CostFrom::BodyBytes`], each data frame's bytes; with
    /// [`CostFrom::Trailer`], the trailer's decimal. The report is let go
    /// when the body ends or is dropped (a client that disconnects), and
    /// the request settles to what was counted up to then.
    ///
    /// ```
    /// use tower_ratelimit::{CostReport, MeteredBody};
    ///
    /// fn metered(body: axum::body::Body, report: Option<CostReport>) -> axum::body::Body {
    ///     match report {
    ///         Some(report) => axum::body::Body::new(MeteredBody::new(body, report)),
    ///         None => body,
    ///     }
    /// }
    /// # let _ = metered;
    /// ```
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        report: Option<CostReport>,
    }
}

impl<B> MeteredBody<B> {
    /// `inner`, reporting to `report`.
    pub fn new(inner: B, report: CostReport) -> Self {
        Self {
            inner,
            report: Some(report),
        }
    }
}

impl<B: Body> Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = std::task::ready!(this.inner.poll_frame(cx));
        match (&polled, this.report.as_ref()) {
            (Some(Ok(frame)), Some(report)) => count(frame, report),
            // The end, or an error: settle now.
            _ => *this.report = None,
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reports what `frame` costs.
fn count<D: Buf>(frame: &Frame<D>, report: &CostReport) {
    match (report.cost_from(), frame.data_ref(), frame.trailers_ref()) {
        (CostFrom::BodyBytes, Some(data), _) => report.add(data.remaining() as u64),
        (CostFrom::Trailer(name), _, Some(trailers)) => {
            if let Some(value) = trailers.get(name) {
                report.read(decimal(value));
            }
        }
        _ => {}
    }
}
