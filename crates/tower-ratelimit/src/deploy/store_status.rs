//! `Limits::stores`: where each limit decides now, and how many
//! instances share it.

use super::limits::Limits;
use ratelimit_redis::StoreState;
use std::sync::PoisonError;

/// Where one limit decides now ([`Limits::stores`]): in memory, on Redis,
/// on the in-memory fallback while Redis fails, or nowhere (`Down`);
/// and the instances sharing it, as last counted through Redis (1 in
/// memory).
///
/// ```
/// use axum::{routing::get, Router};
/// use ratelimit_redis::StoreState;
/// use tower_ratelimit::deploy::Limits;
///
/// let file = "[[limit]]\nname = \"api\"\nalgorithm = \"gcra 100/1m\"\nkey = \"global\"\n";
/// let limits = Limits::from_toml(file, None, |_| None)?;
/// let _app = limits.apply(Router::new().route("/", get(|| async { "hi" })))?;
/// let stores = limits.stores();
/// assert_eq!((stores[0].limit.as_str(), stores[0].state), ("api", StoreState::Memory));
/// assert!(stores.iter().all(|s| s.state.decides()));
/// # Ok::<(), tower_ratelimit::deploy::DeployError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    /// The limit's name.
    pub limit: String,
    /// Where its decisions come from now.
    pub state: StoreState,
    /// The instances sharing it.
    pub instances: u64,
}

impl Limits {
    /// Each limit's store, where it decides now (none before
    /// [`apply`](Self::apply)). Unlike [`ready`](Self::ready), asks
    /// nothing of Redis: a `/ready` route may call it on every probe.
    pub fn stores(&self) -> Vec<StoreStatus> {
        let stores = self
            .inner
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stores
            .iter()
            .map(|(name, store)| StoreStatus {
                limit: name.clone(),
                state: store.state(),
                instances: store.instances(),
            })
            .collect()
    }
}
