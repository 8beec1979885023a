//! What a policy table hands its store factory for one limit
//! ([`StoreSpec`]), and the check that the factory applied all of it.

use ratelimit_core::{BanPolicy, LiveAlgorithm};
use std::cell::Cell;

/// One limit of a policy table, as its store must apply it: its name, its
/// live settings and its ban. [`PolicyTable::apply`](super::PolicyTable::apply)
/// hands one to the store factory for each limit, and refuses the table
/// (naming the limit and the field) when the factory never read the
/// limit's algorithm, or a ban the limit has: neither is dropped in
/// silence.
///
/// ```
/// use axum::{routing::post, Router};
/// use ratelimit_core::MemoryStore;
/// use tower_ratelimit::policy::{PolicyKey, PolicyOptions, PolicyTable, StoreSpec};
///
/// let file = "[[limit]]\nname = \"login\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nban = \"1h\"\n";
/// let table = PolicyTable::from_toml(file, None)?;
/// let router = Router::new().route("/login", post(|| async { "ok" }));
/// let store = |spec: &StoreSpec| {
///     MemoryStore::<_, PolicyKey>::builder(spec.live().clone()).ban(spec.ban()).build()
/// };
/// let (router, _handle) = table.apply(router, &PolicyOptions::default(), store)?;
/// # let _ = router;
/// # Ok::<(), tower_ratelimit::policy::PolicyError>(())
/// ```
#[derive(Debug)]
pub struct StoreSpec<'a> {
    name: &'a str,
    live: &'a LiveAlgorithm,
    ban: Option<BanPolicy>,
    /// Whether the factory read [`ban`](Self::ban).
    ban_read: Cell<bool>,
    /// Whether the factory read [`live`](Self::live).
    live_read: Cell<bool>,
}

impl<'a> StoreSpec<'a> {
    pub(super) fn new(name: &'a str, live: &'a LiveAlgorithm, ban: Option<BanPolicy>) -> Self {
        Self {
            name,
            live,
            ban,
            ban_read: Cell::new(false),
            live_read: Cell::new(false),
        }
    }

    /// The limit's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The limit's settings, which reloads and overrides change: a store
    /// following them keeps the limit live.
    pub fn live(&self) -> &'a LiveAlgorithm {
        self.live_read.set(true);
        self.live
    }

    /// The limit's ban (`ban`, `ban-escalate`...), if it has one. A store
    /// that cannot ban returns an error naming the field instead (see
    /// [`unsupported`](Self::unsupported)).
    pub fn ban(&self) -> Option<BanPolicy> {
        self.ban_read.set(true);
        self.ban
    }

    /// The error of a store that cannot apply `field` of this limit: its
    /// text names the limit and the field.
    pub fn unsupported(&self, field: &str) -> String {
        format!("limit {:?}: its store cannot apply {field}", self.name)
    }

    /// Why the factory's store misses a field of the limit, if it does:
    /// the algorithm or a ban it never read.
    pub(super) fn dropped(&self) -> Option<String> {
        if !self.live_read.get() {
            return Some(format!(
                "limit {:?}: its store factory never read its algorithm (StoreSpec::live): the file's settings would be dropped",
                self.name
            ));
        }
        (self.ban.is_some() && !self.ban_read.get()).then(|| {
            format!(
                "limit {:?} has a ban, but its store factory never read it (StoreSpec::ban): the ban would be dropped",
                self.name
            )
        })
    }
}
