//! Tracing events and `metrics` counters (behind the `metrics` feature).

use crate::key::peer_ip::is_no_peer;
use crate::key::KeyError;
use crate::summary::Summary;
use ratelimit_core::plumbing::{saturating_nanos, LogThrottle};
use ratelimit_core::{Decision, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Metric names. The counters have a `limit` label (key errors: a
/// `reason` label); the fair queue's refusals a `queue` and a `reason`
/// label, the adaptive limit's gauge a `limit` label.
#[cfg(feature = "metrics")]
pub(crate) mod names {
    pub(crate) const ALLOWED: &str = "ratelimit_allowed_total";
    pub(crate) const LIMITED: &str = "ratelimit_limited_total";
    pub(crate) const DRY_RUN: &str = "ratelimit_dry_run_total";
    pub(crate) const KEY_ERRORS: &str = "ratelimit_key_errors_total";
    pub(crate) const STORE_ERRORS: &str = "ratelimit_store_errors_total";
    pub(crate) const BANNED: &str = "ratelimit_banned_total";
    pub(crate) const RESETS: &str = "ratelimit_resets_total";
    pub(crate) const MALFORMED_COSTS: &str = "ratelimit_malformed_costs_total";
    #[cfg(feature = "table")]
    pub(crate) const ALLOWED_BY_LIST: &str = "ratelimit_allowed_by_list_total";
    #[cfg(feature = "table")]
    pub(crate) const DENIED_BY_LIST: &str = "ratelimit_denied_by_list_total";
    pub(crate) const FAIR_QUEUE_REJECTED: &str = "ratelimit_fair_queue_rejected_total";
    pub(crate) const ADAPTIVE_LIMIT: &str = "ratelimit_adaptive_limit";
}

#[cfg(feature = "metrics")]
fn count(name: &'static str, limit: &'static str) {
    metrics::counter!(name, "limit" => limit).increment(1);
}

/// A request an allow list exempted from `limit`.
#[cfg(feature = "table")]
pub(crate) fn allowed_by_list(_limit: &'static str) {
    #[cfg(feature = "metrics")]
    count(names::ALLOWED_BY_LIST, _limit);
}

/// A request a deny list refused (403) on `limit`.
#[cfg(feature = "table")]
pub(crate) fn denied_by_list(_limit: &'static str) {
    #[cfg(feature = "metrics")]
    count(names::DENIED_BY_LIST, _limit);
}

/// A key reset on `limit` by a response (`reset_if`, `reset-on`).
pub(crate) fn reset(_limit: &'static str) {
    #[cfg(feature = "metrics")]
    count(names::RESETS, _limit);
}

#[inline]
pub(crate) fn allowed(_limit: &'static str) {
    #[cfg(feature = "metrics")]
    count(names::ALLOWED, _limit);
}

/// A denial by `limit`: logged, counted, and (unless in dry-run mode) in
/// the limit's `summary` at `now`.
pub(crate) fn limited(
    limit: &'static str,
    d: &Decision,
    dry_run: bool,
    summary: &'static Summary,
    now: u64,
) {
    if dry_run {
        tracing::debug!(limit = %limit, remaining = d.remaining, wait = ?d.wait, "rate limit exceeded (dry run: let through)");
        #[cfg(feature = "metrics")]
        count(names::DRY_RUN, limit);
    } else {
        tracing::debug!(limit = %limit, wait = ?d.wait, banned = d.banned, "rate limited");
        #[cfg(feature = "metrics")]
        {
            count(names::LIMITED, limit);
            if d.banned {
                count(names::BANNED, limit);
            }
        }
        summary.refused(now);
    }
}

/// No peer address is a server set up without connection info, not a bad
/// client: logged at `error`, with the fix, once per layer (`logged`),
/// whatever the key-error policy.
pub(crate) fn no_peer_once(e: &KeyError, layer: &'static str, logged: &AtomicBool) {
    if is_no_peer(e) && !logged.swap(true, Ordering::Relaxed) {
        tracing::error!(
            layer,
            "requests carry no peer address (axum's ConnectInfo<SocketAddr>): serve the app \
             with into_make_service_with_connect_info::<SocketAddr>() (plain hyper: insert a \
             PeerAddr extension per connection). Until then these requests get the key-error \
             policy's answer (400 by default). Logged once per layer.{}",
            AXUM_HINT
        );
    }
}

/// Logs, once per layer, a selector's choice of a limit the layer does
/// not have.
#[cold]
pub(crate) fn stray_selection_once(limits: usize, logged: &AtomicBool) {
    if !logged.swap(true, Ordering::Relaxed) {
        tracing::error!(
            limits,
            "a limit selector chose a limit index past the layer's {limits} limits: \
             such requests are checked against every limit. Logged once per layer."
        );
    }
}

/// What the log adds when axum's connection info cannot be read.
#[cfg(feature = "axum")]
const AXUM_HINT: &str = "";
#[cfg(not(feature = "axum"))]
const AXUM_HINT: &str = " This build reads no axum ConnectInfo: an axum app switches on \
                         tower-ratelimit's `axum` feature.";

pub(crate) fn key_error(e: &KeyError) {
    tracing::debug!(error = %e, "no rate-limit key");
    #[cfg(feature = "metrics")]
    metrics::counter!(names::KEY_ERRORS, "reason" => e.what()).increment(1);
}

/// Store failures, refund failures, malformed costs and readiness
/// failures: at most one line per kind every 20
/// seconds in the whole process, each with the count of those not logged,
/// so that a failing store never logs one line per request.
fn throttled(kind: usize) -> Option<u64> {
    static THROTTLE: OnceLock<(Instant, LogThrottle<4>)> = OnceLock::new();
    let (base, throttle) =
        THROTTLE.get_or_init(|| (Instant::now(), LogThrottle::new(Duration::from_secs(20))));
    let nanos = saturating_nanos(base.elapsed());
    throttle.admit(kind, nanos)
}

pub(crate) fn store_error(limit: &'static str, e: &StoreError, fail_open: bool) {
    if let Some(suppressed) = throttled(0) {
        if fail_open {
            tracing::warn!(limit = %limit, error = %e, suppressed, "rate-limit store failed: letting the request through");
        } else {
            tracing::warn!(limit = %limit, error = %e, suppressed, "rate-limit store failed: rejecting the request");
        }
    }
    #[cfg(feature = "metrics")]
    count(names::STORE_ERRORS, limit);
}

pub(crate) fn reset_error(limit: &'static str, e: &StoreError) {
    if let Some(suppressed) = throttled(1) {
        tracing::warn!(limit = %limit, error = %e, suppressed, "rate-limit reset failed");
    }
    #[cfg(feature = "metrics")]
    count(names::STORE_ERRORS, limit);
}

pub(crate) fn refund_error(limit: &'static str, e: &StoreError) {
    if let Some(suppressed) = throttled(1) {
        tracing::warn!(limit = %limit, error = %e, suppressed, "rate-limit refund failed");
    }
    #[cfg(feature = "metrics")]
    count(names::STORE_ERRORS, limit);
}

/// A readiness probe whose store for `limit` does not answer (and has no
/// fallback to decide meanwhile).
#[cfg(feature = "redis")]
pub(crate) fn not_ready(limit: &str, e: &StoreError) {
    if let Some(suppressed) = throttled(3) {
        tracing::warn!(limit = %limit, error = %e, suppressed, "not ready: the limit's store does not answer, and it has no fallback");
    }
}

/// A response's cost on `limit` that is not a decimal (a header, a
/// trailer): the request settles to at least its reservation.
pub(crate) fn malformed_cost(limit: &'static str) {
    if let Some(suppressed) = throttled(2) {
        tracing::warn!(limit = %limit, suppressed, "a response's cost is not a decimal: settling to at least the reservation");
    }
    #[cfg(feature = "metrics")]
    count(names::MALFORMED_COSTS, limit);
}
