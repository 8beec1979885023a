//! Which clients a limit applies to (`Tier`).

use serde::Deserialize;

/// Which clients an entry applies to, as [`PolicyOptions::authenticated`](super::PolicyOptions::authenticated)
/// tells them apart.
///
/// ```
/// use tower_ratelimit::policy::{PolicyTable, Tier};
///
/// let text = "[[limit]]\nname = \"anon\"\nalgorithm = \"gcra 10/1m\"\nkey = \"client-ip\"\ntier = \"anonymous\"\n";
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// assert_eq!(table.entry("anon").unwrap().tier, Tier::Anonymous);
/// ```
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
