//! What to do when no key can be extracted.

/// What to do with a request whose key cannot be extracted
/// ([`KeyError`](crate::key::KeyError)). With feature `serde` it is read
/// from its name in kebab-case: `reject`, `allow`, `allow-missing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
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
