//! `--against`: two policies on the same log, request by request and key
//! by key.

use super::engine::Outcome;
use super::line::LogLine;
use super::tally::Tally;
use std::collections::BTreeSet;

/// Requests one policy limits and the other does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Limited by the new policy, not the current one.
    pub new_only: u64,
    /// Of them, served in the log (2xx, 3xx).
    pub new_only_succeeded: u64,
    /// Limited by the current policy, not the new one.
    pub old_only: u64,
    /// Limited by both.
    pub both: u64,
}

impl Diff {
    /// Counts one line's outcomes under the new and the current policy.
    pub fn add(&mut self, line: &LogLine, new: &Outcome, old: &Outcome) {
        match (new.limited.is_some(), old.limited.is_some()) {
            (true, false) => {
                self.new_only += 1;
                self.new_only_succeeded += u64::from(line.succeeded());
            }
            (false, true) => self.old_only += 1,
            (true, true) => self.both += 1,
            (false, false) => {}
        }
    }
}

/// One limit's keys, limited by one policy and not the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDiff {
    /// The limit's name (in either policy).
    pub limit: String,
    /// Keys it limits under the new policy only, most limited first.
    pub new_only: Vec<(String, u64)>,
    /// Keys it limits under the current policy only.
    pub old_only: Vec<(String, u64)>,
}

/// The keys of `a`'s limit `name` not limited by `b`'s limit of the same
/// name, most limited first.
fn only_in(a: &Tally, b: &Tally, name: &str) -> Vec<(String, u64)> {
    let Some(la) = a.limits.iter().find(|l| l.name == name) else {
        return Vec::new();
    };
    let lb = b.limits.iter().find(|l| l.name == name);
    let mut keys: Vec<(String, u64)> = la
        .keys
        .iter()
        .filter(|(k, _)| lb.is_none_or(|lb| !lb.keys.contains_key(*k)))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    keys.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    keys
}

/// Per limit name of either policy, the keys limited by one and not the
/// other.
pub fn keys(new: &Tally, old: &Tally) -> Vec<KeyDiff> {
    let mut names: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    for l in new.limits.iter().chain(&old.limits) {
        if seen.insert(l.name.as_str()) {
            names.push(&l.name);
        }
    }
    names
        .into_iter()
        .map(|name| KeyDiff {
            limit: name.to_owned(),
            new_only: only_in(new, old, name),
            old_only: only_in(old, new, name),
        })
        .collect()
}
