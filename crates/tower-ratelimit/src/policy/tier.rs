//! Which clients a limit applies to (`Tier`).

use serde::Deserialize;

/// Which clients an entry applies to, as [`PolicyOptions::authenticated`](super::PolicyOptions::authenticated)
/// tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Every client (the default).
    #[default]
    All,
    /// Only clients that are not authenticated.
    Anonymous,
    /// Only authenticated clients.
    Authenticated,
}
