//! The checker: each key's history searched for a linearization.

use super::*;
use crate::model::{KeyState, Out, Spec};
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;

/// Checks histories against the reference model of one algorithm.
///
/// ```
/// use ratelimit_test_support::history::{Answer, Checker, Event, Op};
/// use ratelimit_test_support::model::Spec;
///
/// let ok = |remaining| Some(Answer { allowed: true, remaining, wait: Some(0), banned: false });
/// let event = |invoke, ret, answer| Event { key: 1, op: Op::Check(1), now: 0, invoke, ret, answer };
/// // Two overlapping checks of a burst of 2: one saw 1 left, the other 0.
/// let history = [event(0, 3, ok(0)), event(1, 2, ok(1))];
/// let checker = Checker::new(Spec::Gcra { limit: 2, period: 10, burst: 2 });
/// assert!(checker.check(&history).is_ok());
/// // Both saw 1 left: a lost update.
/// let lost = [event(0, 3, ok(1)), event(1, 2, ok(1))];
/// assert!(checker.check(&lost).is_err());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Checker {
    spec: Spec,
    ban_on_denial: Option<u64>,
    compare_wait: bool,
    max_steps: u64,
}

impl Checker {
    /// A checker of `spec`'s histories, comparing every field of
    /// [`Answer`], with at most a million search steps per key.
    /// Windows anchored at a key's offset are not supported.
    pub fn new(spec: Spec) -> Self {
        assert!(
            !matches!(
                spec,
                Spec::Fixed {
                    anchor: crate::model::Anchor::KeyOffset,
                    ..
                }
            ),
            "the checker takes no key offsets"
        );
        Self {
            spec,
            ban_on_denial: None,
            compare_wait: true,
            max_steps: 1_000_000,
        }
    }

    /// For a store with a ban policy of `d` ns without escalation
    /// ([`KeyState::ban_on_denial`]).
    pub fn ban_on_denial(mut self, d: u64) -> Self {
        self.ban_on_denial = Some(d);
        self
    }

    /// Compares `allowed`, `remaining` and `banned` only (a store that
    /// reads its own clock, on a long period).
    pub fn ignore_wait(mut self) -> Self {
        self.compare_wait = false;
        self
    }

    /// At most `steps` search steps per key.
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// Checks every key's history in `events` (in any order).
    pub fn check<K: Hash + Eq + Clone + Debug>(
        &self,
        events: &[Event<K>],
    ) -> Result<Summary, Violation> {
        let mut by_key: HashMap<&K, Vec<&Event<K>>> = HashMap::new();
        for e in events {
            by_key.entry(&e.key).or_default().push(e);
        }
        let mut summary = Summary {
            keys: by_key.len(),
            ops: events.len(),
            largest: 0,
            overlapping: 0,
            steps: 0,
        };
        for (key, mut ops) in by_key {
            ops.sort_by_key(|e| e.invoke);
            summary.largest = summary.largest.max(ops.len());
            summary.overlapping += overlapping(&ops);
            summary.steps += self.check_key(key, &ops)?;
        }
        Ok(summary)
    }

    /// One key's search: the steps it took.
    fn check_key<K: Debug>(&self, key: &K, ops: &[&Event<K>]) -> Result<u64, Violation> {
        let name = || format!("{key:?}");
        if ops.len() > 128 {
            return Err(Violation::TooLong {
                key: name(),
                ops: ops.len(),
            });
        }
        let mut search = Search {
            checker: self,
            ops,
            memo: HashSet::new(),
            steps: 0,
            path: Vec::new(),
            best: Vec::new(),
        };
        let mut fresh = KeyState::new(self.spec, 0);
        if let Some(d) = self.ban_on_denial {
            fresh = fresh.ban_on_denial(d);
        }
        match search.dfs(0, &fresh) {
            Some(true) => Ok(search.steps),
            Some(false) => Err(Violation::NotLinearizable {
                key: name(),
                report: search.report(),
            }),
            None => Err(Violation::Undecided {
                key: name(),
                ops: ops.len(),
            }),
        }
    }

    /// Applies `e` to `state`: whether the model's answer matches the one
    /// seen.
    fn apply<K>(&self, state: &mut KeyState, e: &Event<K>) -> bool {
        match e.op {
            Op::Check(cost) => {
                let (out, banned) = state.decide(cost, e.now);
                e.answer.is_none_or(|a| self.matches(out, banned, a))
            }
            Op::Settle {
                reserved,
                actual,
                admitted_at,
            } => {
                let out = state.settle(reserved, actual, admitted_at, e.now);
                e.answer.is_none_or(|a| self.matches(out, false, a))
            }
            Op::Refund { cost, admitted_at } => {
                state.refund(cost, admitted_at, e.now);
                true
            }
            Op::Reset => {
                state.reset();
                true
            }
            Op::Ban(d) => {
                state.ban(d, e.now);
                true
            }
            Op::Unban => {
                state.unban();
                true
            }
        }
    }

    fn matches(&self, out: Out, banned: bool, seen: Answer) -> bool {
        out.allowed == seen.allowed
            && out.remaining == u128::from(seen.remaining)
            && banned == seen.banned
            && (!self.compare_wait || out.wait == seen.wait)
    }
}

/// How many of `ops` overlap another in real time.
fn overlapping<K>(ops: &[&Event<K>]) -> usize {
    let overlaps = |a: &Event<K>, b: &Event<K>| a.invoke < b.ret && b.invoke < a.ret;
    (0..ops.len())
        .filter(|&i| (0..ops.len()).any(|j| i != j && overlaps(ops[i], ops[j])))
        .count()
}

/// One key's search in progress.
struct Search<'a, K> {
    checker: &'a Checker,
    ops: &'a [&'a Event<K>],
    memo: HashSet<(u128, KeyState)>,
    steps: u64,
    /// The order being tried, and the longest one tried.
    path: Vec<usize>,
    best: Vec<usize>,
}

impl<K> Search<'_, K> {
    /// Whether the operations not in `done` can follow, from `state`;
    /// `None` when out of steps.
    fn dfs(&mut self, done: u128, state: &KeyState) -> Option<bool> {
        let n = self.ops.len();
        if done.count_ones() as usize == n {
            return Some(true);
        }
        if !self.memo.insert((done, state.clone())) {
            return Some(false);
        }
        self.steps += 1;
        if self.steps > self.checker.max_steps {
            return None;
        }
        let pending = (0..n).filter(|&i| done & (1 << i) == 0);
        let first_return = pending
            .clone()
            .map(|i| self.ops[i].ret)
            .min()
            .unwrap_or(u64::MAX);
        for i in pending.filter(|&i| self.ops[i].invoke < first_return) {
            let mut next = state.clone();
            if !self.checker.apply(&mut next, self.ops[i]) {
                continue;
            }
            self.path.push(i);
            if self.path.len() > self.best.len() {
                self.best.clone_from(&self.path);
            }
            let found = self.dfs(done | (1 << i), &next)?;
            self.path.pop();
            if found {
                return Some(true);
            }
        }
        Some(false)
    }

    /// The longest order found, then every operation, for a failure's
    /// message.
    fn report(&self) -> String
    where
        K: Debug,
    {
        let line = |e: &Event<K>| {
            format!(
                "  [{}..{}] now {} {:?} -> {:?}\n",
                e.invoke, e.ret, e.now, e.op, e.answer
            )
        };
        let mut out = String::from("longest order the model allows:\n");
        for &i in &self.best {
            out.push_str(&line(self.ops[i]));
        }
        out.push_str("the key's history:\n");
        for e in self.ops {
            out.push_str(&line(e));
        }
        out
    }
}
