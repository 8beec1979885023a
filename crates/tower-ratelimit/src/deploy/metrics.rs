//! `Limits::metrics_router`: the layer's and the stores' counters as
//! Prometheus text at `GET /metrics` (feature `prometheus`).

use super::limits::Limits;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// The process's Prometheus recorder, installed by the first router.
static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// The buckets of the store-latency histogram, in seconds: from 100 µs
/// to the Redis store's default timeout and past it.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// The process's recorder, installed on the first call; when the app
/// installed another one first, this one sees nothing, and says so in
/// the log.
pub(super) fn recorder() -> &'static PrometheusHandle {
    RECORDER.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(LATENCY_BUCKETS)
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if let Err(e) = metrics::set_global_recorder(recorder) {
            tracing::error!(error = %e, "another metrics recorder is installed: GET /metrics shows nothing");
        }
        handle
    })
}

impl Limits {
    /// `GET /metrics` in Prometheus's text format, when `[metrics]` or
    /// `METRICS_ADDR` turns metrics on; serve it on
    /// [`metrics_addr`](Self::metrics_addr), kept private. The process's
    /// `metrics` recorder is installed by [`apply`](Self::apply) (or the
    /// first call); when the app installed another one first, this one
    /// sees nothing, and says so in the log. The store-latency
    /// histogram has buckets from 100 µs to 250 ms.
    pub fn metrics_router(&self) -> Option<Router> {
        self.metrics_addr()?;
        let handle = recorder().clone();
        Some(Router::new().route("/metrics", get(move || std::future::ready(handle.render()))))
    }
}
