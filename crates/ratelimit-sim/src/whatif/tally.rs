//! What a replay counts: per limit and per route, requests seen, admitted
//! and limited, the keys limited, when, and the limited requests the log
//! shows served.

use super::engine::Outcome;
use super::line::LogLine;
use std::collections::{BTreeMap, HashMap};

const MINUTE_NS: u64 = 60_000_000_000;

/// One limit's or one route's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests the limit checked.
    pub seen: u64,
    /// Of them, admitted.
    pub admitted: u64,
    /// Of them, refused (dry run: would have been).
    pub limited: u64,
    /// Of them, refused for want of a usable key (400, 401).
    pub key_errors: u64,
    /// Of the limited, those the log shows served (2xx, 3xx): the
    /// customers the limit would have hurt.
    pub limited_succeeded: u64,
}

/// One limit's tally.
#[derive(Debug, Clone, Default)]
pub struct LimitTally {
    /// The limit's name.
    pub name: String,
    /// Its mode as the policy writes it.
    pub mode: String,
    /// Its counts.
    pub counts: Counts,
    /// Requests limited, by key.
    pub keys: HashMap<String, u64>,
    /// Requests limited, by minute since the epoch.
    pub minutes: BTreeMap<u64, u64>,
    /// Requests limited, by second since the epoch (for the chart).
    pub seconds: BTreeMap<u64, u64>,
    /// Counts by route (`METHOD /path`; `(any)` off the routes listed).
    pub routes: BTreeMap<String, Counts>,
    /// The most keys its store held.
    pub most_keys: usize,
}

impl LimitTally {
    /// The `n` keys limited most, most first (ties by key).
    pub fn top_keys(&self, n: usize) -> Vec<(&str, u64)> {
        let mut keys: Vec<(&str, u64)> = self.keys.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        keys.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        keys.truncate(n);
        keys
    }

    /// The first minute with a limited request.
    pub fn first_minute(&self) -> Option<u64> {
        self.minutes.keys().next().copied()
    }

    /// The minute with the most limited requests (the earliest of ties),
    /// and their number.
    pub fn busiest_minute(&self) -> Option<(u64, u64)> {
        self.minutes
            .iter()
            .fold(None, |best: Option<(u64, u64)>, (&m, &n)| match best {
                Some((_, b)) if b >= n => best,
                _ => Some((m, n)),
            })
    }
}

/// A whole replay's tally.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Lines read (blank lines left out).
    pub lines: u64,
    /// Lines replayed.
    pub replayed: u64,
    /// Lines skipped as unreadable, and the first one's number and reason.
    pub skipped: u64,
    /// The first skipped line: its number and why.
    pub first_skip: Option<(u64, String)>,
    /// Requests a layer refused for want of a usable key.
    pub key_errors: u64,
    /// Requests some limit refused (or would have, in dry run).
    pub limited: u64,
    /// The first and last times replayed (ns since the epoch).
    pub span: Option<(u64, u64)>,
    /// Each store's cap on keys.
    pub max_keys: usize,
    /// Per limit, in the table's order.
    pub limits: Vec<LimitTally>,
}

impl Tally {
    /// An empty tally of limits named `names`, each with its `mode`.
    pub fn new(limits: impl IntoIterator<Item = (String, String)>, max_keys: usize) -> Self {
        Self {
            max_keys,
            limits: limits
                .into_iter()
                .map(|(name, mode)| LimitTally {
                    name,
                    mode,
                    ..LimitTally::default()
                })
                .collect(),
            ..Self::default()
        }
    }

    /// Counts a line that could not be replayed.
    pub fn skip(&mut self, number: u64, why: String) {
        self.skipped += 1;
        self.first_skip.get_or_insert((number, why));
    }

    /// Counts the outcome `o` of `line`.
    pub fn add(&mut self, line: &LogLine, o: &Outcome) {
        self.replayed += 1;
        self.span = Some(match self.span {
            None => (line.time, line.time),
            Some((a, b)) => (a.min(line.time), b.max(line.time)),
        });
        self.key_errors += u64::from(o.key_error.is_some());
        self.limited += u64::from(o.limited.is_some());
        let route = o.route.as_deref().unwrap_or("(any)");
        for (i, limit) in self.limits.iter_mut().enumerate() {
            if o.seen & (1 << i) == 0 {
                continue;
            }
            let refused = o.limited.as_ref().filter(|l| l.limit == i);
            let no_key = o.key_error.is_some_and(|(k, _)| k == i);
            let by_route = match limit.routes.get_mut(route) {
                Some(c) => c,
                None => limit.routes.entry(route.to_owned()).or_default(),
            };
            for c in [&mut limit.counts, by_route] {
                c.seen += 1;
                match refused {
                    Some(_) => {
                        c.limited += 1;
                        c.limited_succeeded += u64::from(line.succeeded());
                    }
                    None if no_key => c.key_errors += 1,
                    None => c.admitted += 1,
                }
            }
            if let Some(l) = refused {
                *limit.keys.entry(l.key.clone()).or_default() += 1;
                *limit.minutes.entry(line.time / MINUTE_NS).or_default() += 1;
                *limit.seconds.entry(line.time / 1_000_000_000).or_default() += 1;
            }
        }
    }

    /// Notes how many keys each store holds now.
    pub fn keys_held(&mut self, counts: &[usize]) {
        for (limit, &n) in self.limits.iter_mut().zip(counts) {
            limit.most_keys = limit.most_keys.max(n);
        }
    }

    /// Whether limit `i`'s store reached its cap (it then evicted keys).
    pub fn cap_reached(&self, i: usize) -> bool {
        self.limits[i].most_keys >= self.max_keys
    }
}
