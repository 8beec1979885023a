//! The queue's state: per-key FIFO queues served by deficit round robin,
//! the in-flight count, and the waiters' slots. Every structure is bounded
//! by the configured total queue length.

use slab::Slab;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::task::Waker;

/// What happened to a waiter.
pub(super) enum WaitState {
    /// Queued; woken when granted.
    Waiting(Option<Waker>),
    /// Given a slot in the inner service (counted in `in_flight`), not yet
    /// taken by its future.
    Granted,
}

pub(super) struct Waiter {
    pub(super) state: WaitState,
    key: usize,
    cost: u64,
}

struct KeyQueue<K> {
    key: K,
    waiters: VecDeque<usize>,
    deficit: u64,
    /// Whether this visit of the round robin has been credited its quantum.
    credited: bool,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Why a request could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// Its key's queue holds the per-key maximum.
    Key,
    /// The whole queue holds the total maximum.
    Total,
}

/// The outcome of an arrival.
pub(super) enum Admit {
    /// A slot now (counted in `in_flight`).
    Now,
    /// Queued in the waiter slot.
    Queued(usize),
    /// Not queued.
    Rejected(Full),
}

/// The fair queue's state, behind the layer's mutex.
pub(super) struct State<K> {
    waiters: Slab<Waiter>,
    keys: Slab<KeyQueue<K>>,
    index: HashMap<K, usize>,
    /// The round robin: a doubly linked list through `keys`.
    head: Option<usize>,
    tail: Option<usize>,
    pub(super) in_flight: usize,
    pub(super) queued: usize,
    max_per_key: usize,
    max_total: usize,
    quantum: u64,
    max_cost: u64,
}

impl<K: Hash + Eq + Clone> State<K> {
    pub(super) fn new(max_per_key: usize, max_total: usize, quantum: u64) -> Self {
        let quantum = quantum.max(1);
        Self {
            waiters: Slab::new(),
            keys: Slab::new(),
            index: HashMap::new(),
            head: None,
            tail: None,
            in_flight: 0,
            queued: 0,
            max_per_key,
            max_total,
            quantum,
            max_cost: quantum.saturating_mul(MAX_ROUNDS),
        }
    }

    /// How many requests of `key` wait.
    #[cfg(test)]
    pub(super) fn waiting(&self, key: &K) -> usize {
        self.index
            .get(key)
            .and_then(|&k| self.keys.get(k))
            .map_or(0, |q| q.waiters.len())
    }

    /// How many keys have waiting requests.
    pub(super) fn keys(&self) -> usize {
        self.index.len()
    }

    /// A request of `key` and `cost` arrives while `limit` may run at once.
    pub(super) fn admit(&mut self, key: K, cost: u64, limit: usize) -> Admit {
        if self.queued == 0 && self.in_flight < limit {
            self.in_flight += 1;
            return Admit::Now;
        }
        if self.queued >= self.max_total {
            return Admit::Rejected(Full::Total);
        }
        let k = match self.index.get(&key) {
            Some(&k) => k,
            None => {
                let k = self.keys.insert(KeyQueue {
                    key: key.clone(),
                    waiters: VecDeque::new(),
                    deficit: 0,
                    credited: false,
                    prev: None,
                    next: None,
                });
                self.index.insert(key, k);
                self.push_back(k);
                k
            }
        };
        let Some(q) = self.keys.get(k) else {
            return Admit::Rejected(Full::Total);
        };
        if q.waiters.len() >= self.max_per_key {
            if q.waiters.is_empty() {
                // Just created for nothing (a per-key maximum of 0).
                self.drop_key(k);
            }
            return Admit::Rejected(Full::Key);
        }
        let w = self.waiters.insert(Waiter {
            state: WaitState::Waiting(None),
            key: k,
            cost: cost.clamp(1, self.max_cost),
        });
        if let Some(q) = self.keys.get_mut(k) {
            q.waiters.push_back(w);
        }
        self.queued += 1;
        Admit::Queued(w)
    }

    pub(super) fn waiter_mut(&mut self, w: usize) -> Option<&mut Waiter> {
        self.waiters.get_mut(w)
    }

    /// The waiter `w` leaves: taken its grant, cancelled or timed out.
    /// Returns whether it held a granted slot, which is now released.
    pub(super) fn leave(&mut self, w: usize) -> bool {
        let Some(waiter) = self.waiters.try_remove(w) else {
            return false;
        };
        match waiter.state {
            WaitState::Granted => true,
            WaitState::Waiting(_) => {
                self.queued -= 1;
                let k = waiter.key;
                if let Some(q) = self.keys.get_mut(k) {
                    if let Some(pos) = q.waiters.iter().position(|&x| x == w) {
                        q.waiters.remove(pos);
                    }
                    if q.waiters.is_empty() {
                        self.drop_key(k);
                    }
                }
                false
            }
        }
    }

    /// Grants waiters while fewer than `limit` run, in deficit round robin
    /// order; pushes their wakers to `wake`.
    pub(super) fn dispatch(&mut self, limit: usize, wake: &mut Vec<Waker>) {
        while self.in_flight < limit {
            let Some(w) = self.next() else { return };
            self.queued -= 1;
            self.in_flight += 1;
            if let Some(waiter) = self.waiters.get_mut(w) {
                if let WaitState::Waiting(Some(waker)) =
                    std::mem::replace(&mut waiter.state, WaitState::Granted)
                {
                    wake.push(waker);
                }
            }
        }
    }

    /// The next waiter to serve, taken off its queue (deficit round robin:
    /// each visit credits a key `quantum`, it is served while its deficit
    /// covers its head's cost, then goes to the back of the round).
    fn next(&mut self) -> Option<usize> {
        // Each round credits every key, and no cost exceeds MAX_ROUNDS
        // quanta: this ends within MAX_ROUNDS + 1 rounds.
        loop {
            let k = self.head?;
            let q = self.keys.get_mut(k)?;
            if !q.credited {
                q.deficit = q.deficit.saturating_add(self.quantum);
                q.credited = true;
            }
            let Some(&w) = q.waiters.front() else {
                self.drop_key(k);
                continue;
            };
            let cost = self.waiters.get(w).map_or(1, |x| x.cost);
            let q = self.keys.get_mut(k)?;
            if q.deficit >= cost {
                q.deficit -= cost;
                q.waiters.pop_front();
                if q.waiters.is_empty() {
                    self.drop_key(k);
                }
                return Some(w);
            }
            q.credited = false;
            if self.head != self.tail {
                self.unlink(k);
                self.push_back(k);
            }
        }
    }

    fn drop_key(&mut self, k: usize) {
        self.unlink(k);
        if let Some(q) = self.keys.try_remove(k) {
            self.index.remove(&q.key);
        }
    }

    fn push_back(&mut self, k: usize) {
        let tail = self.tail;
        if let Some(q) = self.keys.get_mut(k) {
            q.prev = tail;
            q.next = None;
        }
        match tail.and_then(|t| self.keys.get_mut(t)) {
            Some(t) => t.next = Some(k),
            None => self.head = Some(k),
        }
        self.tail = Some(k);
    }

    fn unlink(&mut self, k: usize) {
        let Some(q) = self.keys.get_mut(k) else {
            return;
        };
        let (prev, next) = (q.prev.take(), q.next.take());
        match prev.and_then(|p| self.keys.get_mut(p)) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match next.and_then(|n| self.keys.get_mut(n)) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }
}

/// A request costs at most this many quanta (larger costs are clamped).
pub(super) const MAX_ROUNDS: u64 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// The next `n` waiters served (their slots, never reused here).
    fn grants(s: &mut State<u32>, n: usize) -> Vec<u32> {
        (0..n).map_while(|_| s.next()).map(|w| w as u32).collect()
    }

    #[test]
    fn round_robin_across_keys() {
        let mut s = State::new(10, 100, 1);
        let mut ids = HashMap::new();
        for i in 0..3u32 {
            for key in [1u32, 2, 3] {
                if let Admit::Queued(w) = s.admit(key, 1, 0) {
                    ids.insert(w as u32, (key, i));
                }
            }
        }
        let order: Vec<_> = grants(&mut s, 100)
            .into_iter()
            .filter_map(|w| ids.get(&w).map(|x| x.0))
            .collect();
        assert_eq!(order, [1, 2, 3, 1, 2, 3, 1, 2, 3]);
        assert_eq!(s.keys(), 0);
    }

    #[test]
    fn cost_is_the_quantum() {
        // Key 1 sends cost-2 requests, key 2 cost-1: per round key 2 gets
        // twice as many requests.
        let mut s = State::new(100, 100, 2);
        let mut who = HashMap::new();
        for _ in 0..6 {
            if let Admit::Queued(w) = s.admit(1u32, 2, 0) {
                who.insert(w as u32, 1);
            }
            if let Admit::Queued(w) = s.admit(2u32, 1, 0) {
                who.insert(w as u32, 2);
            }
            if let Admit::Queued(w) = s.admit(2u32, 1, 0) {
                who.insert(w as u32, 2);
            }
        }
        let order: Vec<_> = grants(&mut s, 9).iter().map(|w| who[w]).collect();
        assert_eq!(order, [1, 2, 2, 1, 2, 2, 1, 2, 2]);
    }

    #[test]
    fn bounds_and_leaving() {
        let mut s = State::new(2, 3, 1);
        assert!(matches!(s.admit(9u32, 1, 1), Admit::Now));
        let a = match s.admit(1, 1, 1) {
            Admit::Queued(w) => w,
            _ => panic!(),
        };
        assert!(matches!(s.admit(1, 1, 1), Admit::Queued(_)));
        assert!(matches!(s.admit(1, 1, 1), Admit::Rejected(Full::Key)));
        assert!(matches!(s.admit(2, 1, 1), Admit::Queued(_)));
        assert!(matches!(s.admit(3, 1, 1), Admit::Rejected(Full::Total)));
        // A cancelled waiter frees its place at once.
        assert!(!s.leave(a));
        assert_eq!(s.waiting(&1), 1);
        assert!(matches!(s.admit(3, 1, 1), Admit::Queued(_)));
        assert_eq!(s.keys(), 3);
    }
}
