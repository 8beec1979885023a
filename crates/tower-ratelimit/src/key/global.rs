//! One key for every request: a limit on the whole service.

use super::{KeyError, KeyExtractor};
use http::request::Parts;
use std::fmt;

/// Every request has the same key: the limit applies to the service as a
/// whole (protecting a backend), not per client.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::Global, Gcra, MemoryStore, RateLimitLayer};
///
/// // 100 per minute for the whole service.
/// let layer = RateLimitLayer::new(MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()), Global);
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

/// The key of [`Global`]; displays as `global`.
///
/// ```
/// use tower_ratelimit::key::GlobalKey;
///
/// assert_eq!(GlobalKey.to_string(), "global");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GlobalKey;

impl fmt::Display for GlobalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("global")
    }
}

impl KeyExtractor for Global {
    type Key = GlobalKey;

    #[inline]
    fn extract(&self, _req: &Parts) -> Result<GlobalKey, KeyError> {
        Ok(GlobalKey)
    }
}
