//! What to do when the store cannot decide (Redis down, in-memory store full).

/// What to do when the store fails ([`StoreError`](ratelimit_core::StoreError)).
/// A capped `MemoryStore` with `AtCapacity::Refuse` that refuses a new key
/// ([`CapacityExceeded`](ratelimit_core::StoreError::CapacityExceeded))
/// gets the 503 of [`Closed`](Self::Closed) under either policy: failing
/// open would admit every new key at the cap, unlimited.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::PeerIp, strategy::FailurePolicy, Gcra, MemoryStore, RateLimitLayer};
///
/// let layer = RateLimitLayer::builder(PeerIp::new())
///     .limit("api", MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()))
///     .on_store_error(FailurePolicy::Closed) // 503 while the store fails
///     .build()
///     .unwrap();
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Admit the request as if that limit did not exist; log a warning and
    /// count a store error. The default: a limiter outage must not become
    /// a service outage.
    #[default]
    Open,
    /// Reject with 503 and an `application/problem+json` body saying the
    /// limiter is unavailable (built by the
    /// [`ResponseBuilder`](crate::response::ResponseBuilder)).
    Closed,
}
