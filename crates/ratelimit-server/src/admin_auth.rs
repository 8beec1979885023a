//! The admin API's bearer token check: compared in constant time, wrong tokens limited per source address.

use crate::admin_settings::AdminToken;
use ratelimit_core::{MemoryStore, SlidingLog, Store};
use std::net::IpAddr;
use std::time::Duration;

/// Wrong tokens one source may send a minute; then it gets 429, its
/// token not compared, until its failures are a minute old.
pub const WRONG_TOKENS_PER_MINUTE: u64 = 10;

/// Sources whose failures are kept at once (past that, the store's
/// sketch of evicted keys sums them: a source may be counted as failing
/// more, never less).
const MAX_SOURCES: usize = 100_000;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The token is wrong or missing (or the admin API has none).
    WrongToken,
    /// Too many wrong tokens from this source: retry after this.
    TooMany(Duration),
}

/// The failures of each source (an IPv4 address, an IPv6 /64).
pub(crate) struct TokenGate {
    failures: MemoryStore<SlidingLog, IpAddr>,
}

impl TokenGate {
    pub(crate) fn new() -> Self {
        let log = SlidingLog::new(WRONG_TOKENS_PER_MINUTE, Duration::from_secs(60))
            .unwrap_or_else(|_| unreachable!("a valid limit"));
        Self {
            failures: MemoryStore::builder(log)
                .max_keys(Some(MAX_SOURCES))
                .deny_cache(false)
                .build()
                .unwrap_or_else(|_| unreachable!("a cap of at least 1 key")),
        }
    }

    /// Whether `given` (the bearer token, "" without one) from `peer` at
    /// `now` is `token`: each attempt takes one failure from the source's
    /// budget first, and a right token gives it back.
    pub(crate) fn admit(
        &self,
        token: Option<&AdminToken>,
        peer: IpAddr,
        given: &str,
        now: u64,
    ) -> Result<(), Refused> {
        let source = source_of(peer);
        match self.failures.check(&source, 1, now).value() {
            Ok(d) if d.allowed => {}
            Ok(d) => return Err(Refused::TooMany(d.wait.unwrap_or(d.reset))),
            Err(_) => return Err(Refused::TooMany(Duration::from_secs(60))),
        }
        if !token.is_some_and(|t| t.matches(given)) {
            return Err(Refused::WrongToken);
        }
        let _ = self.failures.refund(&source, 1, now, now).value();
        Ok(())
    }
}

/// The source a peer counts as: an IPv4 address, or an IPv6 address's /64.
fn source_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
    }
}
