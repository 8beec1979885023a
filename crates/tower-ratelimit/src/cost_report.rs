//! [`CostReport`] and [`ActualCost`]: how a handler tells the layer what a request actually cost.

use crate::cost_from::CostFrom;
use std::fmt;
use std::sync::Arc;

/// What a request actually cost, set by the handler as a response
/// extension, read by a limit with [`CostFrom::Extension`].
///
/// ```
/// use axum::{http::StatusCode, response::IntoResponse};
/// use tower_ratelimit::ActualCost;
///
/// // A handler whose limit reads the cost from the extension
/// // (`CostFrom::Extension`): this request cost 42 units.
/// async fn handler() -> impl IntoResponse {
///     let mut res = StatusCode::OK.into_response();
///     res.extensions_mut().insert(ActualCost(42));
///     res
/// }
/// # let _ = handler;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActualCost(pub u64);

/// What a [`CostReport`] feeds: a request's settlement.
pub(crate) trait Meter: Send + Sync + 'static {
    /// Adds `n` to the actual cost.
    fn add(&self, n: u64);
    /// Sets the actual cost to `n`.
    fn set(&self, n: u64);
    /// A cost read from the response (a header, an extension, a
    /// trailer): `Some(n)`, the actual cost is at least `n`; `None`, a
    /// value that is not a decimal: at least the reservation.
    fn read(&self, value: Option<u64>);
    /// What the request reserved.
    fn reserved(&self) -> u64;
    /// Where the limit reads the actual cost.
    fn cost_from(&self) -> &CostFrom;
}

/// A handle on an admitted request's actual cost, put into the request's
/// extensions by a layer that settles costs: the handler (or its body stream) adds what it
/// uses as it goes, per chunk or per event. The request settles when the
/// last clone of the report is dropped (the stream ended, or the client
/// went away and the body was dropped) to the sum added up to then; a
/// report to which nothing was ever added keeps the estimate. A value
/// read from the response (a header, an extension, a trailer) never
/// lowers what was added: the request settles to the larger of the two.
///
/// [`reserved`](Self::reserved) is what the request reserved: a handler
/// that delivers at most that (an LLM gateway passes it upstream as the
/// model's `max_tokens`) never takes a key past its limit, however many
/// of its calls overlap.
///
/// Under stacked layers that settle, the request carries one report that
/// feeds every one of them: what the handler adds or sets reaches each
/// layer's settlement, and [`cost_from`](Self::cost_from) is the innermost
/// layer's (the one nearest the handler).
///
/// ```
/// use axum::{extract::Extension, response::IntoResponse};
/// use tower_ratelimit::CostReport;
///
/// async fn handler(report: Option<Extension<CostReport>>) -> impl IntoResponse {
///     if let Some(Extension(report)) = report {
///         let tokens = report.reserved().min(100); // no more than reserved
///         report.add(tokens); // tokens produced
///     }
///     "ok"
/// }
/// # let _ = handler;
/// ```
#[derive(Clone)]
pub struct CostReport(pub(crate) Arc<dyn Meter>);

impl CostReport {
    /// Adds `n` units to the request's actual cost.
    pub fn add(&self, n: u64) {
        self.0.add(n);
    }

    /// Sets the request's actual cost to `n` (a count the app keeps itself).
    pub fn set(&self, n: u64) {
        self.0.set(n);
    }

    /// What the request reserved at admission (its estimate): the most
    /// it may use without taking its key into debt. Under stacked layers
    /// that settle, the least any of them reserved.
    pub fn reserved(&self) -> u64 {
        self.0.reserved()
    }

    /// Where the limit reads the actual cost.
    pub fn cost_from(&self) -> &CostFrom {
        self.0.cost_from()
    }

    /// A cost read from the response body (a trailer): `Some(n)`, the
    /// request costs at least `n`; `None`, not a decimal.
    pub(crate) fn read(&self, value: Option<u64>) {
        self.0.read(value);
    }
}

impl CostReport {
    /// This layer's report, feeding also `outer`, the report an outer
    /// layer lent the request before this one.
    pub(crate) fn stacked(meter: Arc<dyn Meter>, outer: Option<CostReport>) -> Self {
        match outer {
            None => Self(meter),
            Some(outer) => Self(Arc::new(Stacked {
                inner: meter,
                outer,
            })),
        }
    }
}

/// Two layers' settlements fed by one report.
struct Stacked {
    inner: Arc<dyn Meter>,
    outer: CostReport,
}

impl Meter for Stacked {
    fn add(&self, n: u64) {
        self.inner.add(n);
        self.outer.add(n);
    }

    fn set(&self, n: u64) {
        self.inner.set(n);
        self.outer.set(n);
    }

    fn read(&self, value: Option<u64>) {
        self.inner.read(value);
        self.outer.read(value);
    }

    fn reserved(&self) -> u64 {
        self.inner.reserved().min(self.outer.reserved())
    }

    fn cost_from(&self) -> &CostFrom {
        self.inner.cost_from()
    }
}

impl fmt::Debug for CostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CostReport")
            .field("cost_from", self.cost_from())
            .field("reserved", &self.reserved())
            .finish_non_exhaustive()
    }
}
