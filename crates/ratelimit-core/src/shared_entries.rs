//! Entries set while the limits run that every instance shares
//! ([`SharedEntries`]): allow and deny list entries and per-key overrides
//! added by an admin API, kept where every instance reads them (Redis).
//!
//! The request path never calls it: each instance keeps a local copy of
//! the entries, which the implementation refreshes (after any instance's
//! change, and periodically) by handing every standing entry to a sink.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Which table an entry is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryTable {
    /// The allow list of every limit.
    Allow,
    /// The deny list of every limit.
    Deny,
    /// Per-key overrides of one limit.
    Override,
}

impl EntryTable {
    /// Every table.
    pub const ALL: [Self; 3] = [Self::Allow, Self::Deny, Self::Override];

    /// Its name (`allow`, `deny`, `override`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Override => "override",
        }
    }
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedEntry {
    /// Its table.
    pub table: EntryTable,
    /// An override's limit; empty for a list's entry.
    pub scope: String,
    /// A list's entry (a CIDR, an address, a key) or an override's key.
    pub name: String,
    /// An override's algorithm, as text; empty for a list's entry.
    pub value: String,
    /// How long it has left; `None`: until it is removed.
    pub left: Option<Duration>,
}

/// The future of a [`SharedEntries`] call; an error says why, naming the
/// cap when it is the reason.
pub type EntriesFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'static>>;

/// What receives every standing entry, each time they may have changed.
pub type EntriesSink = Arc<dyn Fn(Vec<SharedEntry>) + Send + Sync>;

/// Where instances share the entries set at run time. Without one, an
/// instance keeps its entries in its own memory only.
pub trait SharedEntries: Send + Sync {
    /// Adds `entry`, or replaces the one of its table, scope and name;
    /// a new one is refused when its table already holds `cap` entries
    /// standing (all scopes together).
    fn put(&self, entry: SharedEntry, cap: usize) -> EntriesFuture<()>;

    /// Removes an entry; whether it was there.
    fn remove(&self, table: EntryTable, scope: &str, name: &str) -> EntriesFuture<bool>;

    /// Hands `sink` every standing entry now, soon after any instance's
    /// change, and periodically (entries expire on their own in the
    /// local copy too), for as long as this lives. Needs a tokio runtime.
    fn follow(&self, sink: EntriesSink);
}
