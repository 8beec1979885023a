//! Trace lines: `T_MS KEY [COST]`, with blank lines and `#` comments.

use crate::SimError;

/// One request of a trace.
///
/// ```
/// use ratelimit_sim::{parse_line, Event};
///
/// let event = parse_line("250 bob 3").unwrap().unwrap();
/// assert_eq!(event, Event { t_ms: 250, key: "bob".into(), cost: 3 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Milliseconds since time 0.
    pub t_ms: u64,
    /// The key.
    pub key: String,
    /// The cost (default 1).
    pub cost: u64,
}

/// Parses one trace line; `Ok(None)` for a blank or comment-only line.
///
/// ```
/// use ratelimit_sim::parse_line;
/// let e = parse_line("100 alice 2 # note").unwrap().unwrap();
/// assert_eq!((e.t_ms, e.key.as_str(), e.cost), (100, "alice", 2));
/// assert!(parse_line("  # only a comment").unwrap().is_none());
/// assert!(parse_line("-1 alice").is_err());
/// ```
pub fn parse_line(line: &str) -> Result<Option<Event>, SimError> {
    let content = line.split_once('#').map_or(line, |(before, _)| before);
    let mut fields = content.split_whitespace();
    let Some(t) = fields.next() else {
        return Ok(None);
    };
    let t_ms = parse_u64(t)
        .ok_or_else(|| SimError(format!("bad time {t:?}: expected integer milliseconds")))?;
    let key = fields
        .next()
        .ok_or_else(|| SimError("missing KEY".to_owned()))?
        .to_owned();
    let cost = match fields.next() {
        None => 1,
        Some(c) => parse_u64(c)
            .ok_or_else(|| SimError(format!("bad cost {c:?}: expected a non-negative integer")))?,
    };
    if let Some(extra) = fields.next() {
        return Err(SimError(format!("unexpected field {extra:?} after COST")));
    }
    Ok(Some(Event { t_ms, key, cost }))
}

/// Digits only: no sign, no spaces.
fn parse_u64(s: &str) -> Option<u64> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}
