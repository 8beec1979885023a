//! Entries set while the limits run that every instance shares
//! ([`SharedEntries`]): allow and deny list entries, per-key overrides and
//! keys moved between plans by an admin API, kept where every instance reads them (Redis).
//!
//! The request path never calls it: each instance keeps a local copy of
//! the entries, which the implementation refreshes (after any instance's
//! change, and periodically) by handing every standing entry to a sink.
//!
//! Entries that may be credentials (a list's key entry, an override of a
//! limit keyed on an API key or a token) are written, stored and handed
//! back only as their [`EntryDigest`]: a keyed hash every instance
//! sharing the entries computes alike, so that an instance matches a
//! request's key by its digest, and the key's text never leaves the
//! instance it was given to.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Which table an entry is in.
///
/// ```
/// use ratelimit_core::plumbing::EntryTable;
///
/// assert_eq!(EntryTable::Deny.as_str(), "deny");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryTable {
    /// The allow list of every limit.
    Allow,
    /// The deny list of every limit.
    Deny,
    /// Per-key overrides of one limit.
    Override,
    /// Keys moved into a plan at run time: scoped by the plans' key spec,
    /// named by the key's digest, valued with the plan's name.
    Plan,
}

impl EntryTable {
    /// Every table.
    pub const ALL: [Self; 4] = [Self::Allow, Self::Deny, Self::Override, Self::Plan];

    /// Its name (`allow`, `deny`, `override`, `plan`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Override => "override",
            Self::Plan => "plan",
        }
    }
}

/// One entry.
///
/// ```
/// use ratelimit_core::plumbing::{EntryTable, SharedEntry};
/// use std::time::Duration;
///
/// let ban_net = SharedEntry {
///     table: EntryTable::Deny,
///     scope: String::new(),
///     name: "198.51.100.0/24".into(),
///     value: String::new(),
///     left: Some(Duration::from_secs(3600)),
/// };
/// # let _ = ban_net;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedEntry {
    /// Its table.
    pub table: EntryTable,
    /// An override's limit, or a plan member's key spec; empty for a
    /// list's entry.
    pub scope: String,
    /// A list's entry (a CIDR, an address, a key), an override's key, or
    /// a plan member's key digest.
    pub name: String,
    /// An override's algorithm, or a plan member's plan, as text; empty
    /// for a list's entry.
    pub value: String,
    /// How long it has left; `None`: until it is removed.
    pub left: Option<Duration>,
}

/// The keyed hash that entries which may be credentials travel and rest
/// as (see the module docs): `#` and the 32 hex digits of a 128-bit hash
/// keyed with a secret that every instance sharing the entries holds
/// (Redis's: SipHash-2-4 with the secret the instances share), so that
/// every instance computes the same. `Debug` shows nothing of its key.
///
/// ```
/// use ratelimit_core::plumbing::EntryDigest;
///
/// let digest = EntryDigest::new(|text| text.len() as u128); // a real one is keyed
/// let name = digest.of("an-api-key");
/// assert!(EntryDigest::is_digest(&name));
/// ```
#[derive(Clone)]
pub struct EntryDigest(Arc<dyn Fn(&str) -> u128 + Send + Sync>);

impl EntryDigest {
    /// The length of a digest's text.
    pub const LEN: usize = 33;

    /// The digest of the keyed 128-bit hash `hash`.
    pub fn new(hash: impl Fn(&str) -> u128 + Send + Sync + 'static) -> Self {
        Self(Arc::new(hash))
    }

    /// The digest of `text`.
    pub fn of(&self, text: &str) -> String {
        format!("#{:032x}", (self.0)(text))
    }

    /// Whether `name` has a digest's form (no key a limit renders by
    /// itself has: a header's value never starts with `#`).
    pub fn is_digest(name: &str) -> bool {
        name.len() == Self::LEN
            && name.starts_with('#')
            && name[1..].bytes().all(|b| b.is_ascii_hexdigit())
    }
}

impl std::fmt::Debug for EntryDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryDigest(..)")
    }
}

/// The future of a [`SharedEntries`] call; an error says why, naming the
/// cap when it is the reason.
///
/// ```
/// use ratelimit_core::plumbing::EntriesFuture;
///
/// let removed: EntriesFuture<bool> = Box::pin(async { Ok(true) });
/// # let _ = removed;
/// ```
pub type EntriesFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'static>>;

/// What receives every standing entry, each time they may have changed,
/// with the digest the entries that may be credentials were written with.
///
/// ```
/// use ratelimit_core::plumbing::EntriesSink;
/// use std::sync::Arc;
///
/// let sink: EntriesSink = Arc::new(|entries, _digest| println!("{} entries", entries.len()));
/// # let _ = sink;
/// ```
pub type EntriesSink = Arc<dyn Fn(Vec<SharedEntry>, EntryDigest) + Send + Sync>;

/// Where instances share the entries set at run time. Without one, an
/// instance keeps its entries in its own memory only.
///
/// ```
/// use ratelimit_core::plumbing::{EntriesFuture, EntriesSink, EntryDigest, EntryTable};
/// use ratelimit_core::plumbing::{SharedEntries, SharedEntry};
/// use std::sync::Mutex;
///
/// /// Entries kept in this process only.
/// struct Local(Mutex<Vec<SharedEntry>>);
///
/// impl SharedEntries for Local {
///     fn digest(&self) -> EntriesFuture<EntryDigest> {
///         Box::pin(async { Ok(EntryDigest::new(|text| text.len() as u128)) })
///     }
///     fn put(&self, entry: SharedEntry, _cap: usize) -> EntriesFuture<()> {
///         self.0.lock().unwrap().push(entry);
///         Box::pin(async { Ok(()) })
///     }
///     fn remove(&self, table: EntryTable, scope: &str, name: &str) -> EntriesFuture<bool> {
///         let mut entries = self.0.lock().unwrap();
///         let before = entries.len();
///         entries.retain(|e| (e.table, e.scope.as_str(), e.name.as_str()) != (table, scope, name));
///         let removed = entries.len() < before;
///         Box::pin(async move { Ok(removed) })
///     }
///     fn follow(&self, sink: EntriesSink) {
///         let digest = EntryDigest::new(|text| text.len() as u128);
///         sink(self.0.lock().unwrap().clone(), digest);
///     }
/// }
/// # let _ = Local(Mutex::new(Vec::new()));
/// ```
pub trait SharedEntries: Send + Sync {
    /// The digest that an entry which may be a credential is written
    /// with (its `name` the digest of its text): every instance sharing
    /// the entries computes the same. It may wait for a secret the
    /// instances share (Redis's, read on connecting).
    fn digest(&self) -> EntriesFuture<EntryDigest>;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_have_one_form() {
        let d = EntryDigest::new(|t: &str| u128::from(t.len() as u64) << 64 | 7);
        let h = d.of("sk-live-1");
        assert_eq!(h.len(), EntryDigest::LEN);
        assert!(EntryDigest::is_digest(&h), "{h}");
        assert_eq!(h, d.of("sk-live-2"));
        assert!(!h.contains("sk-live"));
        for not in [
            "sk-live-1",
            "#abc",
            "10.0.0.0/8",
            &h[1..],
            &format!("#{}", "g".repeat(32)),
        ] {
            assert!(!EntryDigest::is_digest(not), "{not}");
        }
        assert_eq!(format!("{d:?}"), "EntryDigest(..)");
    }
}
