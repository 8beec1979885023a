//! The one decision of several limits: combined when all admitted, the
//! first in debt after a settlement.

use ratelimit_core::Decision;

/// The decision after a settlement of every limit, and the limit it comes
/// from: the first left in debt, if any, else all of them combined.
pub(crate) fn settled(decisions: Vec<Decision>) -> (Decision, usize) {
    match decisions.iter().position(|d| !d.allowed) {
        Some(i) => (decisions[i], i),
        None => (combine(decisions), 0),
    }
}

/// The decision of several limits that all admitted: the one with the
/// fewest `remaining` (the first of those), with the longest `wait`.
pub(crate) fn combine(decisions: Vec<Decision>) -> Decision {
    let wait = decisions.iter().filter_map(|d| d.wait).max();
    // One more unit is available when every limit has one.
    let next = decisions.iter().map(|d| d.next).max().unwrap_or_default();
    let mut best = decisions
        .into_iter()
        .reduce(|a, b| if b.remaining < a.remaining { b } else { a })
        .expect("a store has at least one limit");
    best.wait = wait;
    best.next = next;
    best
}
