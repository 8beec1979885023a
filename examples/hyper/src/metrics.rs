//! Prometheus metrics on their own listener (`METRICS_ADDR`, off unless
//! set), for every example server.
//!
//! The layer's and the Redis store's counters, gauges and histograms go
//! through the `metrics` facade; this installs
//! `metrics-exporter-prometheus` as its recorder, serving the text format
//! at `GET /metrics` on `METRICS_ADDR`. Keep that address off the
//! internet (a loopback or private address, or a firewall): the metrics
//! name every limit.

use metrics_exporter_prometheus::PrometheusBuilder;
use std::net::SocketAddr;
use tower_ratelimit::serve::EnvError;

/// The buckets of the store-latency histogram, in seconds: from 100 µs
/// to the Redis store's default timeout and past it.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// Reads `METRICS_ADDR`: unset or empty, `None` (no metrics); else the
/// address to serve them on. A value that is not an address is an error
/// naming the variable.
pub fn metrics_addr_from_env() -> Result<Option<SocketAddr>, EnvError> {
    match std::env::var("METRICS_ADDR") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|e| EnvError::new("METRICS_ADDR", Some(v), e)),
        _ => Ok(None),
    }
}

/// Serves Prometheus metrics at `GET /metrics` on `METRICS_ADDR` if it is
/// set; returns the address, or `None` when metrics are off. Must be
/// called inside a tokio runtime. A bad value, or an address that cannot
/// be bound, is an error naming `METRICS_ADDR`.
pub fn serve_metrics_from_env() -> Result<Option<SocketAddr>, EnvError> {
    let Some(addr) = metrics_addr_from_env()? else {
        return Ok(None);
    };
    let fail = |e: &dyn std::fmt::Display| EnvError::new("METRICS_ADDR", Some(addr.to_string()), e);
    // Bound here first, so that a taken port is an error at startup, not
    // a line logged later by the exporter's task.
    std::net::TcpListener::bind(addr).map_err(|e| fail(&e))?;
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(LATENCY_BUCKETS)
        .map_err(|e| fail(&e))?
        .install()
        .map_err(|e| fail(&e))?;
    tracing::info!(%addr, "Prometheus metrics at GET /metrics (METRICS_ADDR)");
    Ok(Some(addr))
}
