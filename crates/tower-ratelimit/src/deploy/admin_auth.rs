//! The admin API's token check (`TokenGate`): compared in constant time, failed tokens limited per source address and across all sources.
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

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The token was compared and is wrong (or missing).
    WrongToken,
    /// Too many wrong tokens: not compared; try again after this.
    TooMany(Duration),
}

/// The admin token and the failures of each source and of all.
#[derive(Clone)]
pub(super) struct TokenGate(Arc<Inner>);

struct Inner {
    token: Arc<str>,
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
}

impl TokenGate {
    /// A gate taking `token`, on tokio's clock (paused in tests).
    pub(super) fn new(token: Arc<str>) -> Self {
        Self(Arc::new(Inner {
            token,
            per_source: failures(WRONG_TOKENS_PER_SOURCE, Some(MAX_SOURCES)),
            // One key, `()`.
            all: failures(WRONG_TOKENS_ALL_SOURCES, None),
            clock: TokioClock::new(),
        }))
    }

    /// Whether `given` (the bearer token, or "" without one) from `peer`
    /// is let in (see the module docs).
    pub(super) fn admit(&self, peer: IpAddr, given: &str) -> Result<(), Refused> {
        let gate = &self.0;
        let now = gate.clock.now();
        let source = IpPrefixes::DEFAULT.key(peer);
        let mine = gate.per_source.check(&source, 1, now).value();
        let mine = match mine {
            Ok(d) if d.allowed => d,
            Ok(d) => return Err(Refused::TooMany(d.wait.unwrap_or(d.reset))),
            Err(_) => return Err(Refused::TooMany(Duration::from_secs(60))),
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
            return Err(Refused::TooMany(wait));
        }
        if !same(given.as_bytes(), gate.token.as_bytes()) {
            return Err(Refused::WrongToken);
        }
        let _ = gate.per_source.refund(&source, 1, now, now).value();
        if all_took {
            let _ = gate.all.refund(&(), 1, now, now).value();
        }
        Ok(())
    }
}

/// Whether `given` equals `token`, in time that does not depend on where
/// they differ: every byte of `token` is compared.
fn same(given: &[u8], token: &[u8]) -> bool {
    let differ = token.iter().enumerate().fold(0u8, |acc, (i, t)| {
        acc | (t ^ given.get(i).copied().unwrap_or(!t))
    });
    differ == 0 && given.len() == token.len()
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn same_is_equality() {
        assert!(same(b"abcdef", b"abcdef"));
        for given in [&b"abcdeg"[..], b"abcde", b"abcdefg", b"", b"Abcdef"] {
            assert!(!same(given, b"abcdef"), "{given:?}");
        }
    }
}
