//! What operators do to one key of a limit (peek, reset, ban, unban), and the stores' readiness probe: every store call outside checks and settlements.

use crate::limits::Limits;
use crate::rule::Rule;
use ratelimit_core::{Decision, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// The key the readiness probe peeks (a peek writes nothing).
const PROBE_KEY: &str = "\u{0}ratelimitd-ready";

/// Why an operation on a key could not be done.
///
/// ```
/// use ratelimit_server::{Config, KeyOpError, State};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "office"
///     domain = "edge"
///     unlimited = true
///     descriptors = [{ key = "remote_address", value = "192.0.2.10" }]
/// "#, "inline", |_| None).unwrap();
/// let state = State::new(&config).unwrap();
/// let rule = state.limits().named("office").unwrap().clone();
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let err = rule.reset_key(&"192.0.2.10".to_owned()).await.unwrap_err();
/// assert!(matches!(err, KeyOpError::Unlimited));
/// # });
/// ```
#[derive(Debug)]
pub enum KeyOpError {
    /// The limit is unlimited: it keeps no state.
    Unlimited,
    /// Its store failed.
    Store(StoreError),
}

impl std::fmt::Display for KeyOpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unlimited => f.write_str("the limit is unlimited: it keeps no state"),
            Self::Store(e) => write!(f, "the store failed: {e}"),
        }
    }
}

impl std::error::Error for KeyOpError {}

/// A key's state, as a peek and its ban tell it.
///
/// ```
/// use ratelimit_server::{Config, State};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 10/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let state = State::new(&config).unwrap();
/// let rule = state.limits().named("per-ip").unwrap().clone();
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let key = "10.0.0.1".to_owned();
/// rule.ban_key(&key, std::time::Duration::from_secs(60), state.now()).await.unwrap();
/// let seen = rule.key_state(&key, state.now()).await.unwrap();
/// assert_eq!(seen.peek.remaining, 10);
/// assert!(seen.banned.is_some());
/// # });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct KeyState {
    /// What a check of cost 0 answers now.
    pub peek: Decision,
    /// What is left of its ban, if it is banned.
    pub banned: Option<Duration>,
}

impl Rule {
    fn stored(&self) -> Result<&ratelimit_core::BoxStore<String>, KeyOpError> {
        self.store.as_ref().ok_or(KeyOpError::Unlimited)
    }

    /// `key`'s state at `now`, changing nothing.
    pub async fn key_state(&self, key: &String, now: u64) -> Result<KeyState, KeyOpError> {
        let store = self.stored()?;
        let peek = store.check(key, 0, now).await.map_err(KeyOpError::Store)?;
        let banned = store.ban_left(key, now).await.map_err(KeyOpError::Store)?;
        Ok(KeyState { peek, banned })
    }

    /// Forgets `key`'s state: its whole quota is back.
    pub async fn reset_key(&self, key: &String) -> Result<(), KeyOpError> {
        self.stored()?.reset(key).await.map_err(KeyOpError::Store)
    }

    /// Bans `key` for `duration` from `now`.
    pub async fn ban_key(
        &self,
        key: &String,
        duration: Duration,
        now: u64,
    ) -> Result<(), KeyOpError> {
        let store = self.stored()?;
        store
            .ban(key, duration, now)
            .await
            .map_err(KeyOpError::Store)
    }

    /// Lifts `key`'s ban and resets it: lifted with its use still over
    /// the limit, a ban on denials would begin again at its next request.
    pub async fn unban_key(&self, key: &String) -> Result<(), KeyOpError> {
        let store = self.stored()?;
        store.reset(key).await.map_err(KeyOpError::Store)?;
        store.unban(key).await.map_err(KeyOpError::Store)
    }
}

/// Whether every limit's store answers at `now` (checked when `shared`,
/// the stores being Redis; memory always answers): `Err` names a limit
/// whose store failed, and how. The limits are probed together.
pub(crate) async fn stores_answer(limits: &Limits, shared: bool, now: u64) -> Result<(), String> {
    if !shared {
        return Ok(());
    }
    let mut probes = tokio::task::JoinSet::new();
    for rule in limits.all().filter(|r| r.store.is_some()) {
        let rule: Arc<Rule> = Arc::clone(rule);
        probes.spawn(async move {
            let Some(store) = rule.store.as_ref() else {
                return Ok(());
            };
            let answer = store.check(&PROBE_KEY.to_owned(), 0, now).await;
            answer
                .map(drop)
                .map_err(|e| format!("limit {:?}: {e}", rule.config.name))
        });
    }
    while let Some(done) = probes.join_next().await {
        done.map_err(|e| format!("a probe failed: {e}"))??;
    }
    Ok(())
}
