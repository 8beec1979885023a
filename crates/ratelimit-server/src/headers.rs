//! The IETF `RateLimit-Policy` and `RateLimit` fields and `Retry-After` of an outcome.

use crate::check::{Outcome, Status};
use ratelimit_core::plumbing::ceil_secs;
use ratelimit_core::Decision;
use std::time::Duration;

/// The time a refused descriptor reports (`duration_until_reset`, `t`):
/// the wait until the same request is admitted; for a request that can
/// never be admitted (its cost above the capacity), the time until the
/// key is full again, or the window when it is full already: never 0,
/// so no client reads it as "retry now".
pub(crate) fn refusal_wait(d: &Decision) -> Duration {
    match d.retry_after() {
        Some(wait) => wait,
        None if d.reset.is_zero() => d.window,
        None => d.reset,
    }
}

/// The header fields of `outcome`, as `(name, value)` pairs, for one
/// descriptor only, so that an answer's fields stay small whatever the
/// number of descriptors: on a refusal the one that refused, else the
/// most restrictive limited one (the least `remaining`, the first of
/// equals). `Retry-After` comes on a refusal that can succeed later.
///
/// `q` is the limit, `w` its window in seconds, `r` what is left and `t`
/// the seconds until it is full again; with nothing left, until one more
/// unit is; for the descriptor that refused, until the request may be
/// retried (for a request that can never be admitted, until the key is
/// full again, at least 1). Seconds are rounded up.
pub fn fields(outcome: &Outcome) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(3);
    let Some((status, name, d)) = shown(outcome) else {
        return out;
    };
    out.push((
        "ratelimit-policy",
        format!("\"{name}\";q={};w={}", d.limit, ceil_secs(d.window)),
    ));
    let t = if status.over {
        ceil_secs(refusal_wait(&d)).max(1)
    } else if d.remaining == 0 {
        ceil_secs(d.next)
    } else {
        ceil_secs(d.reset)
    };
    out.push(("ratelimit", format!("\"{name}\";r={};t={t}", d.remaining)));
    if let (true, Some(wait)) = (status.over, d.retry_after()) {
        out.push(("retry-after", ceil_secs(wait).max(1).to_string()));
    }
    out
}

/// The descriptor whose fields an answer shows: the one that refused,
/// else the limited one with the least `remaining` (the first of equals).
fn shown(outcome: &Outcome) -> Option<(&Status, &str, Decision)> {
    let mut limited = outcome
        .statuses
        .iter()
        .filter(|s| !outcome.over || s.over)
        .filter_map(|s| Some((s, s.rule.as_ref()?.config.name.as_str(), s.decision?)));
    let first = limited.next()?;
    Some(limited.fold(first, |best, next| {
        if next.2.remaining < best.2.remaining {
            next
        } else {
            best
        }
    }))
}
