//! The admin API's token check (`AdminGate`): compared in constant time, failed tokens limited per source address and across all sources.
//!
//! Each request first takes one failure from its source's budget
//! ([`WRONG_TOKENS_PER_SOURCE`] a minute, keyed by the peer's address, an IPv6 /64)
//! and one from the budget of all sources ([`WRONG_TOKENS_ALL_SOURCES`] a minute);
//! a right token gives both back, a wrong one keeps them. So concurrent
//! guesses cannot slip past either budget:
//!
//! - a source whose budget is spent gets 429 without its token being
//!   compared, until its failures are a minute old;
//! - while the budget of all sources is spent, a source that has failed
//!   in the last minute gets 429 without its token being compared, and
//!   a source that has not is compared once: a right token is accepted
//!   (a source that never failed is never locked out by others'
//!   failures), a wrong one is its failure.
//!
//! Wrong tokens compared in a minute: at most [`WRONG_TOKENS_ALL_SOURCES`], plus one
//! per source address that had not failed in it (an IPv6 source is its
//! /64).
//!
//! A source that failed [`WRONG_TOKENS_PER_SOURCE`] times is refused whatever its
//! token for up to a minute: on an address several users share
//! (loopback), one of them can lock the others out of that address, not
//! out of another (`127.0.0.2`). The failures of 100,000 sources are kept
//! at once; past that, the oldest are summed in the store's sketch of
//! evicted keys, which may count a source that never failed as failing,
//! never the other way.

use super::admin_token::AdminToken;
use crate::key::{IpKey, IpPrefixes};
use ratelimit_core::{Algorithm, Clock, MemoryStore, SlidingLog, Store, TokioClock};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Wrong tokens one source address may send a minute.
pub const WRONG_TOKENS_PER_SOURCE: u64 = 10;

/// Wrong tokens all sources together may send a minute, before only
/// sources that have not failed get their token compared.
pub const WRONG_TOKENS_ALL_SOURCES: u64 = 30;

/// Source addresses whose failures are kept at once (more: the oldest
/// are summed in a sketch, never forgotten; see `MemoryStore`).
const MAX_SOURCES: usize = 100_000;

/// Why [`AdminGate::admit`] refused a request.
///
/// ```
/// use tower_ratelimit::deploy::{AdminGate, AdminRefusal, AdminToken};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let token = AdminToken::new("0123456789abcdef").unwrap();
/// let gate = AdminGate::new();
/// let peer = "192.0.2.1".parse().unwrap();
/// assert_eq!(gate.admit(&token, peer, "wrong"), Err(AdminRefusal::WrongToken));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminRefusal {
    /// The token was compared and is wrong (or missing): answer 401.
    WrongToken,
    /// Too many wrong tokens: not compared; answer 429 and retry after this.
    TooMany(Duration),
}

/// The admin API's token check: the failures of each source and of all
/// sources (see the module docs), on tokio's clock (paused in tests).
/// One gate serves every request of an admin listener; the token is
/// given at each call, so a reload can change it and keep the failures.
///
/// ```
/// use tower_ratelimit::deploy::{AdminGate, AdminToken, WRONG_TOKENS_PER_SOURCE};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let token = AdminToken::new("0123456789abcdef").unwrap();
/// let gate = AdminGate::new();
/// let peer = "192.0.2.1".parse().unwrap();
/// assert!(gate.admit(&token, peer, "0123456789abcdef").is_ok());
/// for _ in 0..WRONG_TOKENS_PER_SOURCE {
///     assert!(gate.admit(&token, peer, "wrong").is_err());
/// }
/// // Spent: even the right token waits now.
/// assert!(gate.admit(&token, peer, "0123456789abcdef").is_err());
/// # }
/// ```
#[derive(Clone)]
pub struct AdminGate(Arc<Inner>);

impl std::fmt::Debug for AdminGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminGate").finish_non_exhaustive()
    }
}

impl Default for AdminGate {
    fn default() -> Self {
        Self::new()
    }
}

struct Inner {
    per_source: MemoryStore<SlidingLog, IpKey>,
    all: MemoryStore<SlidingLog, ()>,
    clock: TokioClock,
}

/// A store of `limit` failures a minute, of at most `max_keys` keys.
fn failures<K>(limit: u64, max_keys: Option<usize>) -> MemoryStore<SlidingLog, K> {
    let log = SlidingLog::new(limit, Duration::from_secs(60)).expect("a valid limit");
    MemoryStore::builder(log)
        .max_keys(max_keys)
        .deny_cache(false)
        .build()
        .expect("a cap of at least 1 key")
}

impl AdminGate {
    /// A gate no source has failed yet.
    pub fn new() -> Self {
        Self(Arc::new(Inner {
            per_source: failures(WRONG_TOKENS_PER_SOURCE, Some(MAX_SOURCES)),
            // One key, `()`.
            all: failures(WRONG_TOKENS_ALL_SOURCES, None),
            clock: TokioClock::new(),
        }))
    }

    /// Whether `given` (the bearer token, or "" without one) from `peer`
    /// is `token` and may be compared (see the module docs).
    pub fn admit(&self, token: &AdminToken, peer: IpAddr, given: &str) -> Result<(), AdminRefusal> {
        let gate = &self.0;
        let now = gate.clock.now();
        let source = IpPrefixes::DEFAULT.key(peer);
        let mine = gate.per_source.check(&source, 1, now).value();
        let mine = match mine {
            Ok(d) if d.allowed => d,
            Ok(d) => return Err(AdminRefusal::TooMany(d.wait.unwrap_or(d.reset))),
            Err(_) => return Err(AdminRefusal::TooMany(Duration::from_secs(60))),
        };
        // Only the failure just taken: the source has not failed lately.
        let fresh = mine.remaining + 1 == gate.per_source.algorithm().limit();
        let all = gate.all.check(&(), 1, now).value();
        let all_took = matches!(all, Ok(d) if d.allowed);
        if !all_took && !fresh {
            let _ = gate.per_source.refund(&source, 1, now, now).value();
            let wait = all
                .ok()
                .and_then(|d| d.wait)
                .unwrap_or(Duration::from_secs(1));
            return Err(AdminRefusal::TooMany(wait));
        }
        if !token.matches(given) {
            return Err(AdminRefusal::WrongToken);
        }
        let _ = gate.per_source.refund(&source, 1, now, now).value();
        if all_took {
            let _ = gate.all.refund(&(), 1, now, now).value();
        }
        Ok(())
    }
}
