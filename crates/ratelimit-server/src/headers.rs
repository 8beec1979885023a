//! The IETF `RateLimit-Policy` and `RateLimit` fields and `Retry-After` of an outcome.

use crate::check::{Outcome, Status};
use ratelimit_core::plumbing::ceil_secs;

/// The header fields of `outcome`, as `(name, value)` pairs: one list
/// member per limited descriptor (on a refusal, only the one that
/// refused), and `Retry-After` on a refusal that can succeed later.
///
/// `q` is the limit, `w` its window in seconds, `r` what is left and `t`
/// the seconds until it is full again; with nothing left, until one more
/// unit is; for the descriptor that refused, until the request may be
/// retried. Seconds are rounded up.
pub fn fields(outcome: &Outcome) -> Vec<(&'static str, String)> {
    let members: Vec<(&Status, &str)> = outcome
        .statuses
        .iter()
        .filter(|s| !outcome.over || s.over)
        .filter_map(|s| Some((s, s.rule.as_ref()?.config.name.as_str())))
        .filter(|(s, _)| s.decision.is_some())
        .collect();
    let mut out = Vec::with_capacity(3);
    if members.is_empty() {
        return out;
    }
    let mut policy = Vec::with_capacity(members.len());
    let mut state = Vec::with_capacity(members.len());
    let mut retry = None;
    for (status, name) in members {
        let Some(d) = status.decision else { continue };
        policy.push(format!(
            "\"{name}\";q={};w={}",
            d.limit,
            ceil_secs(d.window)
        ));
        let t = if status.over {
            retry = d.retry_after();
            d.retry_after().unwrap_or(d.reset)
        } else if d.remaining == 0 {
            d.next
        } else {
            d.reset
        };
        state.push(format!("\"{name}\";r={};t={}", d.remaining, ceil_secs(t)));
    }
    out.push(("ratelimit-policy", policy.join(", ")));
    out.push(("ratelimit", state.join(", ")));
    if let Some(wait) = retry {
        out.push(("retry-after", ceil_secs(wait).max(1).to_string()));
    }
    out
}
