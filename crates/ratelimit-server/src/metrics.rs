//! Prometheus metrics: decisions per limit, requests per plan, check latency, reloads; the recorder and `GET /metrics`.

use axum::routing::get;
use axum::Router;
use metrics::Counter;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// Decisions, by `limit`, `domain` and `code`.
pub const DECISIONS: &str = "ratelimitd_decisions_total";
/// The time a check took, in seconds, by `protocol` (`grpc`, `http`).
pub const CHECK_SECONDS: &str = "ratelimitd_check_duration_seconds";
/// Descriptors that matched no limit (an unknown domain, or entries no
/// limit of the domain has), admitted; no labels: what a caller sends
/// never becomes one.
pub const UNMATCHED: &str = "ratelimitd_unmatched_total";
/// Requests (a gRPC call, an HTTP check or settlement) by `plan`
/// (`none`: no plan), while the file has plans.
pub const PLAN_REQUESTS: &str = "ratelimitd_plan_requests_total";
/// Reloads, by `outcome` (`applied`, `refused`).
pub const RELOADS: &str = "ratelimitd_reloads_total";

/// The buckets of the check-latency histogram, in seconds.
const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// One limit's decision counters, by code.
#[derive(Debug)]
pub(crate) struct RuleMetrics {
    pub(crate) admitted: Counter,
    pub(crate) refused: Counter,
    pub(crate) shadow_refused: Counter,
    pub(crate) peek: Counter,
    pub(crate) error: Counter,
}

impl RuleMetrics {
    /// The counters of the limit `name` in `domain` (names only: never a key).
    pub(crate) fn new(name: &str, domain: &str) -> Self {
        let counter = |code: &'static str| metrics::counter!(DECISIONS, "limit" => name.to_owned(), "domain" => domain.to_owned(), "code" => code);
        Self {
            admitted: counter("admitted"),
            refused: counter("refused"),
            shadow_refused: counter("shadow_refused"),
            peek: counter("peek"),
            error: counter("error"),
        }
    }
}

/// Records how long a check over `protocol` took.
pub(crate) fn check_took(protocol: &'static str, took: Duration) {
    metrics::histogram!(CHECK_SECONDS, "protocol" => protocol).record(took.as_secs_f64());
}

/// Counts a request of the plan `plan` (a name from the file).
pub(crate) fn plan_request(plan: &'static str) {
    metrics::counter!(PLAN_REQUESTS, "plan" => plan).increment(1);
}

/// Counts a reload by its outcome.
pub(crate) fn reloaded(applied: bool) {
    let outcome = if applied { "applied" } else { "refused" };
    metrics::counter!(RELOADS, "outcome" => outcome).increment(1);
}

/// The process's Prometheus recorder, installed on first call as the
/// `metrics` facade's global recorder (once per process); an error if
/// another recorder was installed first.
pub fn recorder() -> Result<PrometheusHandle, String> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(CHECK_SECONDS.to_owned()),
                    BUCKETS,
                )
                .map_err(|e| e.to_string())?
                .install_recorder()
                .map_err(|e| format!("cannot install the Prometheus recorder: {e}"))
        })
        .clone()
}

/// `GET /metrics`: the Prometheus text format of `handle`.
///
/// ```
/// let handle = ratelimit_server::metrics::recorder().unwrap();
/// let _router = ratelimit_server::metrics::router(handle);
/// ```
pub fn router(handle: PrometheusHandle) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move {
                handle.run_upkeep();
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    handle.render(),
                )
            }
        }),
    )
}
