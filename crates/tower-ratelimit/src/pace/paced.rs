//! [`Paced`]: which bodies a pace layer paces (uploads, downloads, or both).

/// Which bodies a [`PaceLayer`](super::PaceLayer) paces.
///
/// ```
/// use tower_ratelimit::pace::Paced;
///
/// assert_eq!(Paced::default(), Paced::Responses);
/// assert!(Paced::Both.requests() && !Paced::Responses.requests());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Paced {
    /// Response bodies (downloads). The default.
    #[default]
    Responses,
    /// Request bodies (uploads): the handler reads them no faster than the
    /// limit allows.
    Requests,
    /// Both, from one budget per key.
    Both,
}

impl Paced {
    /// Whether request bodies are paced.
    pub const fn requests(self) -> bool {
        matches!(self, Self::Requests | Self::Both)
    }

    /// Whether response bodies are paced.
    pub const fn responses(self) -> bool {
        matches!(self, Self::Responses | Self::Both)
    }
}
