//! A handle on one limit a policy table built: the very store its layer
//! uses, to check, peek, refund, reset, ban and unban a key.

use crate::key::{HeaderKey, IpPrefixes};
use crate::override_key::{ip_key, NotIpKey};
use crate::policy::key::PolicyKey;
use ipnet::IpNet;
use ratelimit_core::{BoxStore, Clock, Decision, LiveAlgorithm, Store, StoreError};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// How one part of a limit's key is written as text (see
/// [`LimitHandle::key`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum TextPart {
    /// An address or a network, keyed at these prefix lengths.
    Ip(IpPrefixes),
    /// A header's value; secret for a credential.
    Text { secret: bool },
    /// Everyone.
    Global,
    /// A route (not written by hand).
    Route,
    /// A key the app defines: an address if it reads as one, else secret
    /// text (as an API key the app checks).
    App,
}

/// One limit of a [`PolicyTable`](crate::policy::PolicyTable), from
/// [`PolicyHandle::get`](crate::policy::PolicyHandle::get): the store its
/// layer uses (no wrapper), its clock and its live algorithm.
///
/// ```
/// # async fn demo(limits: &tower_ratelimit::policy::PolicyHandle) -> Result<(), Box<dyn std::error::Error>> {
/// let login = limits.get("login-failures").ok_or("no such limit")?;
/// let ip = login.key("203.0.113.7")?;
/// login.reset(&ip).await?;                                   // after a password reset
/// login.ban(&ip, std::time::Duration::from_secs(3600)).await?;
/// assert!(login.peek(&ip).await?.allowed);                    // a peek is never refused
/// login.unban(&ip).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LimitHandle {
    pub(crate) name: String,
    pub(crate) live: LiveAlgorithm,
    pub(crate) store: BoxStore<PolicyKey>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) parts: Box<[TextPart]>,
}

impl fmt::Debug for LimitHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitHandle")
            .field("name", &self.name)
            .field("algorithm", &self.live.get())
            .finish_non_exhaustive()
    }
}

impl LimitHandle {
    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its live algorithm (reloads and overrides change it).
    pub fn algorithm(&self) -> &LiveAlgorithm {
        &self.live
    }

    /// The store its layer uses.
    pub fn store(&self) -> &BoxStore<PolicyKey> {
        &self.store
    }

    /// Now, on the layer's clock.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// The key written `text` as the limit renders it: an address or a
    /// network (`203.0.113.7`, `2001:db8:1:2::/64`, keyed at the limit's
    /// prefix lengths), a header's value, an API key or a token (the
    /// key's text, which the store hashes if it is a secret), `global`;
    /// a composite's parts joined by `|`. An address is masked to the
    /// limit's network (`2001:db8:1:2::5` on a per-/64 limit is
    /// `2001:db8:1:2::/64`); a network of another length than the limit
    /// keys is refused, naming the limit: it is not one client's key. An
    /// app key written as an address or a network is taken as an address
    /// keyed at v4/32, v6/64.
    pub fn key(&self, text: &str) -> Result<PolicyKey, String> {
        key_of_text(&format!("limit {:?}", self.name), &self.parts, text)
    }

    /// A check of `cost` for `key` now, as the layer makes it.
    pub async fn check(&self, key: &PolicyKey, cost: u64) -> Result<Decision, StoreError> {
        let now = self.now();
        self.store.check(key, cost, now).await
    }

    /// What `key` has left now (a cost-0 check: changes nothing).
    pub async fn peek(&self, key: &PolicyKey) -> Result<Decision, StoreError> {
        self.check(key, 0).await
    }

    /// Gives back `cost` that `key` was admitted at `admitted_at` (the
    /// layer's clock, as [`now`](Self::now)).
    pub async fn refund(
        &self,
        key: &PolicyKey,
        cost: u64,
        admitted_at: u64,
    ) -> Result<(), StoreError> {
        let now = self.now();
        self.store.refund(key, cost, admitted_at, now).await
    }

    /// Forgets `key`'s state: its next request has the whole quota.
    pub async fn reset(&self, key: &PolicyKey) -> Result<(), StoreError> {
        self.store.reset(key).await
    }

    /// Bans `key` for `duration` from now.
    pub async fn ban(&self, key: &PolicyKey, duration: Duration) -> Result<(), StoreError> {
        let now = self.now();
        self.store.ban(key, duration, now).await
    }

    /// What is left of `key`'s ban now, if it is banned.
    pub async fn ban_left(&self, key: &PolicyKey) -> Result<Option<Duration>, StoreError> {
        self.store.ban_left(key, self.now()).await
    }

    /// Lifts `key`'s ban (and forgets its offences). Its use stays: a key
    /// still over its limit is denied, and banned again, at its next
    /// request; [`reset`](Self::reset) it first to let it start afresh.
    pub async fn unban(&self, key: &PolicyKey) -> Result<(), StoreError> {
        self.store.unban(key).await
    }
}

/// The key written `text` (parts joined by `|`) of a key whose parts are
/// written as `parts`, of `what` (`limit "api"`, `plan "pro"`; see
/// [`LimitHandle::key`]).
pub(crate) fn key_of_text(what: &str, parts: &[TextPart], text: &str) -> Result<PolicyKey, String> {
    let texts: Vec<&str> = if parts.len() == 1 {
        vec![text]
    } else {
        text.split('|').collect()
    };
    if texts.len() != parts.len() {
        return Err(format!(
            "{what} has {} key parts joined by |; got {}",
            parts.len(),
            texts.len()
        ));
    }
    let keys = parts
        .iter()
        .zip(texts)
        .map(|(p, t)| part_key(what, *p, t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match <[PolicyKey; 1]>::try_from(keys) {
        Ok([one]) => one,
        Err(keys) => PolicyKey::Composite(keys.into()),
    })
}

/// The key of one part written `text`, of `what` (`limit "api"`).
fn part_key(what: &str, part: TextPart, text: &str) -> Result<PolicyKey, String> {
    let text = text.trim();
    if text.is_empty() || text.len() > 4096 {
        return Err("a key is 1 to 4096 characters".to_owned());
    }
    let ip = |prefixes: IpPrefixes| match ip_key(prefixes, text) {
        Ok(key) => Ok(PolicyKey::Ip(key)),
        Err(NotIpKey::NotIp) => Err(format!(
            "bad key {text:?}: expected an address or a network"
        )),
        Err(NotIpKey::Length {
            given,
            want,
            family,
        }) => Err(format!(
            "bad key {text:?}: {what} keys each {family} client by its /{want}, \
             so a /{given} network is not one client's key"
        )),
    };
    match part {
        TextPart::Ip(prefixes) => ip(prefixes),
        TextPart::Text { secret: true } => Ok(PolicyKey::Text(HeaderKey::secret(text.as_bytes()))),
        TextPart::Text { secret: false } => Ok(PolicyKey::Text(HeaderKey::new(text.as_bytes()))),
        TextPart::Global if text == "global" => Ok(PolicyKey::Global),
        TextPart::Global => Err(format!(
            "bad key {text:?}: a global limit's key is \"global\""
        )),
        TextPart::Route => Err("a route key cannot be written by hand".to_owned()),
        TextPart::App if text.parse::<IpAddr>().is_ok() || text.parse::<IpNet>().is_ok() => {
            ip(IpPrefixes::default())
        }
        TextPart::App => Ok(PolicyKey::Text(HeaderKey::secret(text.as_bytes()))),
    }
}
