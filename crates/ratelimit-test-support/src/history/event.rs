//! What a history holds: each operation, its answer and its times, and
//! the recorder that stamps them.

use std::collections::HashMap;
use std::fmt::Debug;
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
