//! Descriptors that match no limit: admitted, counted (`ratelimitd_unmatched_total`) and logged (throttled, keys only).

use crate::rule::Entry;
use ratelimit_core::plumbing::LogThrottle;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest part of a domain or of an entry's key a log line shows.
const SHOWN: usize = 64;

/// Counts a descriptor of `entries` in `domain` that matches no limit
/// (an unknown domain, or no limit of it with these entries), and logs it
/// at most once a minute with how many were held back: the domain and
/// the entries' keys, each cut at 64 characters, never their values
/// (they may be keys, tokens or addresses).
pub(crate) fn unmatched(domain: &str, entries: &[Entry<'_>]) {
    metrics::counter!(crate::metrics::UNMATCHED).increment(1);
    static LOG: OnceLock<(Instant, LogThrottle<1>)> = OnceLock::new();
    let (start, log) =
        LOG.get_or_init(|| (Instant::now(), LogThrottle::new(Duration::from_secs(60))));
    let now = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    if let Some(held) = log.admit(0, now) {
        let keys: Vec<&str> = entries.iter().map(|(k, _)| cut(k)).collect();
        tracing::warn!(
            domain = cut(domain),
            keys = ?keys,
            held_back = held,
            "a descriptor matches no limit: admitted (check the domain and the entries' keys)"
        );
    }
}

/// `text` cut at [`SHOWN`] characters.
fn cut(text: &str) -> &str {
    text.char_indices()
        .nth(SHOWN)
        .map_or(text, |(i, _)| &text[..i])
}
