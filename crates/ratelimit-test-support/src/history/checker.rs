//! Linearizability of a store's concurrent histories: operations recorded
//! from many threads or tasks, and each key's history searched for an
//! order, consistent with real time, in which the reference model gives
//! every answer seen.
//!
//! The search is Wing and Gong's: depth first over the operations that
//! may go next (invoked before any pending operation returned), with
//! Lowe's memo of (the set of operations linearized, the model's state),
//! so an order already refuted is not tried again. Keys share nothing
//! (ALGORITHMS.md, "Ground rules"), so each key's history is checked on
//! its own (P-compositionality). A key holds at most 128 operations, and
//! the search is bounded in steps ([`Checker::max_steps`]).
//!
//! Time: each operation carries the `now` the store decided at. On a
//! manual clock that no task moves during a burst, every operation of the
//! burst has the same `now`, and bursts are apart in real time, so any
//! order the search takes keeps time monotonic. A store that reads its own
//! clock (Redis's `TIME`) can be checked on a period so long that the
//! test's seconds move no `allowed` or `remaining`, with
//! [`Checker::ignore_wait`] and any constant `now`.

use crate::model::{KeyState, Out, Spec};
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What an operation asked of the store.
///
/// ```
/// use ratelimit_test_support::history::Op;
///
/// let refund = Op::Refund { cost: 1, admitted_at: 0 };
/// assert_ne!(refund, Op::Check(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A check of this cost (0: a peek).
    Check(u64),
    /// A refund of `cost` admitted at `admitted_at`.
    Refund {
        /// The cost given back.
        cost: u64,
        /// When it was admitted.
        admitted_at: u64,
    },
    /// A settlement of a request admitted at `admitted_at` with
    /// `reserved` to its `actual` cost (GCRA and the token bucket).
    Settle {
        /// The cost reserved.
        reserved: u64,
        /// The cost actually used.
        actual: u64,
        /// When it was admitted.
        admitted_at: u64,
    },
    /// A reset of the key.
    Reset,
    /// A ban of the key for this many nanoseconds.
    Ban(u64),
    /// An unban.
    Unban,
}

/// What a check answered: the fields the reference model decides.
///
/// ```
/// use ratelimit_test_support::history::Answer;
/// use std::time::Duration;
///
/// let a = Answer::new(false, 0, Some(Duration::from_millis(250)), false);
/// assert_eq!(a.wait, Some(250_000_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Admitted?
    pub allowed: bool,
    /// `remaining` after the decision.
    pub remaining: u64,
    /// The wait in nanoseconds; `None` for never.
    pub wait: Option<u128>,
    /// Denied by a ban?
    pub banned: bool,
}

impl Answer {
    /// A decision's fields (`ratelimit_core::Decision`'s `allowed`,
    /// `remaining`, `wait`, `banned`), its wait in nanoseconds.
    pub fn new(allowed: bool, remaining: u64, wait: Option<Duration>, banned: bool) -> Self {
        Self {
            allowed,
            remaining,
            wait: wait.map(|w| w.as_nanos()),
            banned,
        }
    }
}

/// One operation of a history: its key, what it asked, the time the store
/// used, its invocation and return on the recorder's logical clock, and a
/// check's answer.
///
/// ```
/// use ratelimit_test_support::history::{Event, Op};
///
/// let reset = Event { key: "k", op: Op::Reset, now: 0, invoke: 3, ret: 4, answer: None };
/// assert!(reset.invoke < reset.ret);
/// ```
#[derive(Debug, Clone)]
pub struct Event<K> {
    /// The key.
    pub key: K,
    /// What was asked.
    pub op: Op,
    /// The time the store decided at (ns).
    pub now: u64,
    /// The logical instant before the call.
    pub invoke: u64,
    /// The logical instant after it returned.
    pub ret: u64,
    /// A check's or a settlement's answer (`None` for other operations).
    pub answer: Option<Answer>,
}

/// Records events from many threads: [`invoke`](Self::invoke) just before
/// a call, [`record`](Self::record) just after it returned. One atomic
/// counter orders invocations and returns.
///
/// ```
/// use ratelimit_test_support::history::{Answer, Checker, Op, Recorder};
/// use ratelimit_test_support::model::Spec;
///
/// let rec = Recorder::new();
/// let at = rec.invoke();
/// let answer = Answer { allowed: true, remaining: 0, wait: Some(0), banned: false };
/// rec.record(at, "k", Op::Check(1), 0, Some(answer));
/// let checker = Checker::new(Spec::Gcra { limit: 1, period: 10, burst: 1 });
/// assert!(checker.check(&rec.events()).is_ok());
/// ```
#[derive(Debug, Default)]
pub struct Recorder<K> {
    ticks: AtomicU64,
    events: Mutex<Vec<Event<K>>>,
}

impl<K> Recorder<K> {
    /// An empty recorder.
    pub fn new() -> Self {
        Self {
            ticks: AtomicU64::new(0),
            events: Mutex::new(Vec::new()),
        }
    }

    /// The logical instant of an invocation.
    pub fn invoke(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::SeqCst)
    }

    /// Records an operation invoked at `invoke` that has just returned.
    pub fn record(&self, invoke: u64, key: K, op: Op, now: u64, answer: Option<Answer>) {
        let event = self.returned(invoke, key, op, now, answer);
        self.events.lock().expect("not poisoned").push(event);
    }

    /// The event of an operation invoked at `invoke` that has just
    /// returned, for a thread that keeps its own events (no lock between
    /// its calls) and hands them to [`add`](Self::add) at the end.
    pub fn returned(
        &self,
        invoke: u64,
        key: K,
        op: Op,
        now: u64,
        answer: Option<Answer>,
    ) -> Event<K> {
        let ret = self.ticks.fetch_add(1, Ordering::SeqCst);
        Event {
            key,
            op,
            now,
            invoke,
            ret,
            answer,
        }
    }

    /// Adds events a thread kept.
    pub fn add(&self, events: Vec<Event<K>>) {
        self.events.lock().expect("not poisoned").extend(events);
    }

    /// The events recorded so far, taken out of the recorder.
    pub fn events(&self) -> Vec<Event<K>> {
        std::mem::take(&mut *self.events.lock().expect("not poisoned"))
    }
}

/// How often a random workload asks for each operation, in percent (the
/// rest are checks, mostly of cost 1, else of cost 0 to `max_cost`).
///
/// ```
/// use ratelimit_test_support::history::{Mix, Op};
/// use ratelimit_test_support::SplitMix64;
///
/// let mut rng = SplitMix64(7);
/// let op = Mix::CHECKS.op(&mut rng, 0, 1_000);
/// assert!(matches!(op, Op::Check(0..=2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Refunds of cost 1.
    pub refund: u64,
    /// Settlements of a reservation of 1 or 2 to 0 to 3 (GCRA and the
    /// token bucket only).
    pub settle: u64,
    /// Resets.
    pub reset: u64,
    /// Bans.
    pub ban: u64,
    /// Unbans.
    pub unban: u64,
    /// The largest cost of a check.
    pub max_cost: u64,
}

impl Mix {
    /// Checks only, of costs 0 to 2.
    pub const CHECKS: Mix = Mix {
        refund: 0,
        settle: 0,
        reset: 0,
        ban: 0,
        unban: 0,
        max_cost: 2,
    };

    /// Checks, refunds, resets, bans and unbans (no settlements).
    pub const ALL: Mix = Mix {
        refund: 15,
        settle: 0,
        reset: 3,
        ban: 4,
        unban: 6,
        max_cost: 3,
    };

    /// A random operation: a refund gives back one unit admitted at
    /// `admitted_at`, a ban lasts `ban_for` ns.
    pub fn op(&self, rng: &mut crate::SplitMix64, admitted_at: u64, ban_for: u64) -> Op {
        let mut roll = rng.below(100);
        let settle = Op::Settle {
            reserved: 1 + rng.below(2),
            actual: rng.below(4),
            admitted_at,
        };
        for (percent, op) in [
            (
                self.refund,
                Op::Refund {
                    cost: 1,
                    admitted_at,
                },
            ),
            (self.settle, settle),
            (self.reset, Op::Reset),
            (self.ban, Op::Ban(ban_for)),
            (self.unban, Op::Unban),
        ] {
            if roll < percent {
                return op;
            }
            roll -= percent;
        }
        if rng.chance(60) {
            Op::Check(1)
        } else {
            Op::Check(rng.below(self.max_cost + 1))
        }
    }
}

/// The cost each key was admitted in `events` (checks only), for modes
/// whose contract is a bound rather than an order.
pub fn admitted_cost<K: Hash + Eq + Clone>(events: &[Event<K>]) -> HashMap<K, u64> {
    let mut sums = HashMap::new();
    for e in events {
        if let (Op::Check(cost), Some(a)) = (e.op, e.answer) {
            *sums.entry(e.key.clone()).or_insert(0) += if a.allowed { cost } else { 0 };
        }
    }
    sums
}

/// What a checked history held.
///
/// ```
/// use ratelimit_test_support::history::{Checker, Recorder};
/// use ratelimit_test_support::model::Spec;
///
/// let none = Recorder::<u8>::new().events();
/// let spec = Spec::Window { limit: 2, period: 10 };
/// assert_eq!(Checker::new(spec).check(&none).unwrap().ops, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Keys checked.
    pub keys: usize,
    /// Operations checked.
    pub ops: usize,
    /// The most operations of one key.
    pub largest: usize,
    /// Operations overlapping another of their key in real time.
    pub overlapping: usize,
    /// Search steps taken, over every key.
    pub steps: u64,
}

impl Summary {
    /// Adds `other`'s counts (`largest`: the larger).
    pub fn add(&mut self, other: Summary) {
        self.keys += other.keys;
        self.ops += other.ops;
        self.largest = self.largest.max(other.largest);
        self.overlapping += other.overlapping;
        self.steps += other.steps;
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} keys, {} operations ({} overlapping another), at most {} per key, {} steps",
            self.keys, self.ops, self.overlapping, self.largest, self.steps
        )
    }
}

/// Why a history was not accepted.
///
/// ```
/// use ratelimit_test_support::history::{Answer, Checker, Event, Op, Violation};
/// use ratelimit_test_support::model::Spec;
///
/// // A burst of 1 admitting a cost of 2.
/// let answer = Some(Answer::new(true, 0, Some(std::time::Duration::ZERO), false));
/// let e = Event { key: 0, op: Op::Check(2), now: 0, invoke: 0, ret: 1, answer };
/// let checker = Checker::new(Spec::Gcra { limit: 1, period: 10, burst: 1 });
/// assert!(matches!(checker.check(&[e]), Err(Violation::NotLinearizable { .. })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// No order of the key's operations gives every answer seen.
    NotLinearizable {
        /// The key, as `Debug` shows it.
        key: String,
        /// The longest prefix found, then the operation none could follow.
        report: String,
    },
    /// The search ran out of steps before it decided.
    Undecided {
        /// The key, as `Debug` shows it.
        key: String,
        /// Its operations.
        ops: usize,
    },
    /// A key has more operations than the search takes (128).
    TooLong {
        /// The key, as `Debug` shows it.
        key: String,
        /// Its operations.
        ops: usize,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::NotLinearizable { key, report } => {
                write!(f, "key {key}: not linearizable\n{report}")
            }
            Violation::Undecided { key, ops } => {
                write!(f, "key {key}: {ops} operations, search out of steps")
            }
            Violation::TooLong { key, ops } => {
                write!(f, "key {key}: {ops} operations, more than 128")
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const GCRA: Spec = Spec::Gcra {
        limit: 2,
        period: 10,
        burst: 2,
    };

    fn check(invoke: u64, ret: u64, cost: u64, allowed: bool, remaining: u64) -> Event<u8> {
        let wait = if allowed { Some(0) } else { Some(5) };
        let answer = Answer {
            allowed,
            remaining,
            wait,
            banned: false,
        };
        let op = Op::Check(cost);
        event(invoke, ret, op, Some(answer))
    }

    fn event(invoke: u64, ret: u64, op: Op, answer: Option<Answer>) -> Event<u8> {
        Event {
            key: 0,
            op,
            now: 0,
            invoke,
            ret,
            answer,
        }
    }

    fn banned(invoke: u64, ret: u64) -> Event<u8> {
        let answer = Answer {
            allowed: false,
            remaining: 0,
            wait: Some(100),
            banned: true,
        };
        event(invoke, ret, Op::Check(1), Some(answer))
    }

    fn verdict(history: &[Event<u8>]) -> Result<Summary, Violation> {
        Checker::new(GCRA).check(history)
    }

    #[test]
    fn overlapping_checks_may_go_in_either_order() {
        let history = [
            check(0, 5, 1, true, 0),
            check(1, 2, 1, true, 1),
            check(3, 4, 1, false, 0),
        ];
        let summary = verdict(&history).unwrap();
        assert_eq!((summary.keys, summary.ops, summary.largest), (1, 3, 3));
        assert_eq!(summary.overlapping, 3);
    }

    #[test]
    fn a_lost_update_is_rejected() {
        let history = [check(0, 3, 1, true, 1), check(1, 2, 1, true, 1)];
        let err = verdict(&history).unwrap_err();
        assert!(matches!(err, Violation::NotLinearizable { .. }), "{err}");
        assert!(err.to_string().contains("longest order"), "{err}");
    }

    #[test]
    fn real_time_order_is_kept() {
        // The second check starts after the first returned, so it cannot
        // have gone first: 0 left then 1 left is impossible.
        let history = [check(0, 1, 1, true, 0), check(2, 3, 1, true, 1)];
        assert!(verdict(&history).is_err());
        let overlapping = [check(0, 2, 1, true, 0), check(1, 3, 1, true, 1)];
        assert!(verdict(&overlapping).is_ok());
    }

    #[test]
    fn a_refund_applied_twice_is_rejected() {
        let refund = Op::Refund {
            cost: 1,
            admitted_at: 0,
        };
        let mut history = vec![
            check(0, 1, 1, true, 1),
            check(2, 3, 1, true, 0),
            event(4, 5, refund, None),
            check(6, 7, 1, true, 0),
        ];
        assert!(verdict(&history).is_ok());
        // Twice given back: 1 left after the check, not 0.
        history[3] = check(6, 7, 1, true, 1);
        assert!(verdict(&history).is_err());
    }

    #[test]
    fn a_denial_kept_past_an_unban_is_rejected() {
        let ban = event(0, 1, Op::Ban(100), None);
        let unban = event(4, 5, Op::Unban, None);
        let stale = [ban.clone(), banned(2, 3), unban.clone(), banned(6, 7)];
        assert!(verdict(&stale).is_err());
        let fresh = [ban.clone(), banned(2, 3), unban, check(6, 7, 1, true, 1)];
        assert!(verdict(&fresh).is_ok());
        // A check overlapping the unban may see either side of it.
        let racing = [ban, event(2, 5, Op::Unban, None), banned(3, 4)];
        assert!(verdict(&racing).is_ok());
    }

    #[test]
    fn a_reset_gives_the_burst_back() {
        let history = [
            check(0, 1, 2, true, 0),
            event(2, 3, Op::Reset, None),
            check(4, 5, 1, true, 1),
        ];
        assert!(verdict(&history).is_ok());
    }

    #[test]
    fn wait_is_compared_unless_ignored() {
        let mut denied = check(2, 3, 1, false, 0);
        let history = [check(0, 1, 2, true, 0), denied.clone()];
        // The model's wait at 0 is one emission interval (5 ns).
        assert!(verdict(&history).is_ok());
        denied.answer.as_mut().unwrap().wait = Some(4);
        let wrong = [history[0].clone(), denied];
        assert!(verdict(&wrong).is_err());
        assert!(Checker::new(GCRA).ignore_wait().check(&wrong).is_ok());
    }

    #[test]
    fn a_search_out_of_steps_says_so() {
        // Eight peeks all overlapping, one of them wrong: refuted only
        // after every subset of the others was tried.
        let mut history: Vec<_> = (0..8).map(|i| check(i, 100 + i, 0, true, 2)).collect();
        history[7] = check(7, 107, 0, true, 1);
        assert!(verdict(&history).is_err());
        let err = Checker::new(GCRA).max_steps(3).check(&history).unwrap_err();
        assert!(matches!(err, Violation::Undecided { ops: 8, .. }), "{err}");
    }

    #[test]
    fn a_refuted_history_of_40_operations_is_decided_in_bounds() {
        // 8 threads of 5 peeks each, overlapping within and across rounds,
        // the last answer impossible: every order of the others is tried.
        let mut history = Vec::new();
        for i in 0..8 {
            for j in 0..5 {
                history.push(check(20 * j + i, 20 * j + 15 + i, 0, true, 2));
            }
        }
        history[39].answer.as_mut().unwrap().remaining = 1;
        let err = verdict(&history).unwrap_err();
        assert!(matches!(err, Violation::NotLinearizable { .. }), "{err}");
    }

    #[test]
    fn a_ban_policy_bans_on_a_denial_with_nothing_left() {
        let ban = Answer {
            allowed: false,
            remaining: 0,
            wait: Some(100),
            banned: true,
        };
        let history = [
            check(0, 1, 2, true, 0),
            event(2, 3, Op::Check(1), Some(ban)),
            event(
                4,
                5,
                Op::Check(1),
                Some(Answer {
                    wait: Some(100),
                    ..ban
                }),
            ),
        ];
        assert!(Checker::new(GCRA)
            .ban_on_denial(100)
            .check(&history)
            .is_ok());
        assert!(verdict(&history).is_err(), "no ban without the policy");
    }

    #[test]
    fn a_settlement_up_leaves_the_key_in_debt() {
        let settle = Op::Settle {
            reserved: 1,
            actual: 3,
            admitted_at: 0,
        };
        let owed = |wait| Answer {
            allowed: false,
            remaining: 0,
            wait: Some(wait),
            banned: false,
        };
        // Burst 2, T = 5 ns: 2 used, 2 more charged (capped at 2 owed).
        let history = [
            check(0, 1, 2, true, 0),
            event(2, 3, settle, Some(owed(10))),
            event(4, 5, Op::Check(1), Some(owed(15))),
        ];
        assert!(verdict(&history).is_ok());
        let paid = [history[0].clone(), event(2, 3, settle, Some(owed(5)))];
        assert!(verdict(&paid).is_err());
    }

    #[test]
    fn keys_are_checked_apart() {
        let mut other = check(0, 1, 2, true, 0);
        other.key = 1;
        let history = [check(0, 1, 2, true, 0), other];
        assert_eq!(verdict(&history).unwrap().keys, 2);
    }
}
