//! The connections the server closes on its own, counted by reason
//! (`CONNECTIONS_CLOSED`).

/// The counter of connections the server closed on its own, by `reason`.
pub const CONNECTIONS_CLOSED: &str = "server_connections_closed_total";
/// `reason`: one more connection than its client's cap.
pub(super) const CLOSED_CLIENT_CAP: &str = "client_cap";
/// `reason`: idle longest when all slots were taken.
pub(super) const CLOSED_SHED_FULL: &str = "shed_full";
/// `reason`: idle longest when out of file descriptors (or memory).
pub(super) const CLOSED_SHED_ACCEPT_ERROR: &str = "shed_accept_error";
/// `reason`: no request in flight for the idle timeout.
pub(super) const CLOSED_IDLE: &str = "idle";

/// Counts `n` connections closed for `reason` in [`CONNECTIONS_CLOSED`].
pub(super) fn closed(reason: &'static str, n: usize) {
    if n > 0 {
        metrics::counter!(CONNECTIONS_CLOSED, "reason" => reason).increment(n as u64);
    }
}
