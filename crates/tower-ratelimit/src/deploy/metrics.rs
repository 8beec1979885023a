//! `Limits::metrics_router`: the layer's and the stores' counters as
//! Prometheus text at `GET /metrics` (feature `prometheus`).

use super::limits::Limits;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// The process's Prometheus recorder, installed by the first router.
static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

impl Limits {
    /// `GET /metrics` in Prometheus's text format, when `[metrics]` or
    /// `METRICS_ADDR` turns metrics on; serve it on
    /// [`metrics_addr`](Self::metrics_addr), kept private. The first call
    /// installs the process's `metrics` recorder; when the app installed
    /// another one first, this one sees nothing, and says so in the log.
    pub fn metrics_router(&self) -> Option<Router> {
        self.metrics_addr()?;
        let handle = RECORDER.get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                tracing::error!(error = %e, "another metrics recorder is installed: GET /metrics shows nothing");
            }
            handle
        });
        let handle = handle.clone();
        Some(Router::new().route("/metrics", get(move || std::future::ready(handle.render()))))
    }
}
