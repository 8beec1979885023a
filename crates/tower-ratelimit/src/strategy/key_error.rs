//! What to do when no key can be extracted.

/// What to do with a request whose key cannot be extracted
/// ([`KeyError`](crate::key::KeyError)). With feature `table` it is read
/// from its name in kebab-case: `reject`, `allow`, `allow-missing`.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::{key::ApiKey, strategy::KeyErrorPolicy, Gcra, MemoryStore, RateLimitLayer};
///
/// // Requests without an API key pass unlimited here (another limit takes them).
/// let layer = RateLimitLayer::builder(ApiKey::new())
///     .limit("api-key", MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()))
///     .on_key_error(KeyErrorPolicy::AllowMissing)
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
pub enum KeyErrorPolicy {
    /// Reject with the error's 4xx status (400, or 401 for missing
    /// credentials), built by the
    /// [`ResponseBuilder`](crate::response::ResponseBuilder). The default.
    #[default]
    Reject,
    /// Let every such request through, unlimited.
    Allow,
    /// Let requests with a *missing* key through unlimited; reject
    /// *malformed* ones. For optional keys, such as an API key that only
    /// some clients send.
    AllowMissing,
}

impl KeyErrorPolicy {
    /// Whether a request whose key failed with `e` goes through, unlimited:
    /// never when the extractor denied it, else as the policy says.
    pub(crate) fn passes(self, e: &crate::key::KeyError) -> bool {
        !e.is_denied()
            && match self {
                Self::Reject => false,
                Self::Allow => true,
                Self::AllowMissing => e.is_missing(),
            }
    }
}
