//! The layer that finds a request's plan once, outside every limit of the
//! table: the limits scoped to a plan read it from the request, and with
//! feature `metrics` it counts `ratelimit_plan_requests_total{plan}`.

use super::pace::AddLayer;
use super::plan_book::{PlanBook, RequestPlan};
use axum::extract::{Request, State};
use axum::Router;
use std::sync::Arc;

/// What adds the plan layer to a router, outermost of the table's.
pub(super) fn plan_layer(book: Arc<PlanBook>) -> AddLayer {
    Box::new(move |router: Router| {
        router.route_layer(axum::middleware::map_request_with_state(book, tag))
    })
}

/// `req` with its plan as an extension, counted.
async fn tag(State(book): State<Arc<PlanBook>>, req: Request) -> Request {
    let (mut parts, body) = req.into_parts();
    let plan = book.plan_of(&parts);
    #[cfg(feature = "metrics")]
    metrics::counter!("ratelimit_plan_requests_total", "plan" => book.name(plan)).increment(1);
    parts.extensions.insert(RequestPlan(plan));
    Request::from_parts(parts, body)
}
