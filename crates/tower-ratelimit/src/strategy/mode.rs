//! What the layer does with a decision: enforce it, only record it, or shape traffic.

/// What the layer does with a decision. With feature `table` it is read
/// from its name in kebab-case: `enforce`, `dry-run`, `shape`.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::PeerIp, strategy::Mode, Gcra, MemoryStore, RateLimitLayer};
///
/// // Count and log what would be refused, refuse nothing.
/// let layer = RateLimitLayer::builder(PeerIp::new())
///     .limit("trial", MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()))
///     .mode(Mode::DryRun)
///     .build()
///     .unwrap();
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "table",
    derive(serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum Mode {
    /// Denied requests get the rejection response (429); admitted ones go
    /// on at once.
    #[default]
    Enforce,
    /// Decide, record (tracing, metrics, headers, extensions) but never
    /// reject: denied requests go on too, marked in
    /// [`RateLimitInfo::is_dry_run`](crate::RateLimitInfo::is_dry_run).
    /// Denied requests consume nothing, so the numbers show exactly what
    /// enforcing would do.
    DryRun,
    /// For the leaky bucket: an admitted request is held for its
    /// [`Decision::hold`](ratelimit_core::Decision::hold) (a `tokio` sleep)
    /// and then passed on, so requests leave at a steady rate; a full queue
    /// is rejected as in `Enforce`.
    ///
    /// A request dropped while held (the client went away) gives its slot
    /// back: the layer refunds it, so a later request may leave up to one
    /// interval early. With a remote store whose refund is not immediate,
    /// the refund is attempted once and otherwise the slot stays used.
    Shape,
}
