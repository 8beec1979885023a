//! [`PaceBuildError`]: a pacing setting that cannot work, naming the bad value.

use std::fmt;

/// The largest piece a paced body charges at once (16 MiB): a piece is
/// held in memory while it waits for its budget.
pub const MAX_PIECE: u64 = 16 << 20;

/// Why a [`PaceLayer`](super::PaceLayer) cannot be built: the setting and
/// its value.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::pace::{PaceBuildError, PaceLayer, MAX_PIECE};
/// use tower_ratelimit::{key::Global, Gcra, MemoryStore};
///
/// let store = || MemoryStore::new(Gcra::new(1 << 20, Duration::from_secs(1)).unwrap());
/// let zero = PaceLayer::builder("dl", store(), Global, 0).build().err();
/// assert_eq!(zero, Some(PaceBuildError::ZeroPiece));
/// let huge = PaceLayer::builder("dl", store(), Global, MAX_PIECE + 1).build().err();
/// assert_eq!(huge, Some(PaceBuildError::PieceTooLarge(MAX_PIECE + 1)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PaceBuildError {
    /// A piece of 0 bytes: nothing would ever be charged or sent.
    ZeroPiece,
    /// A piece above [`MAX_PIECE`] bytes (the size given).
    PieceTooLarge(u64),
    /// A name that cannot go in logs and metric labels: 1 to 64 printable
    /// ASCII characters (the name given).
    BadName(String),
}

impl fmt::Display for PaceBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroPiece => f.write_str(
                "a pace piece of 0 bytes charges nothing and sends nothing: give 1 byte or more",
            ),
            Self::PieceTooLarge(n) => {
                write!(
                    f,
                    "a pace piece of {n} bytes is above the most, {MAX_PIECE} bytes"
                )
            }
            Self::BadName(n) => write!(
                f,
                "bad pace name {n:?}: use 1 to 64 printable ASCII characters"
            ),
        }
    }
}

impl std::error::Error for PaceBuildError {}
