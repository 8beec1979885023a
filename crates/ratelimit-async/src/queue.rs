//! Per-key queues of waiters: one waiter per key sleeps on a timer, the
//! others wait their turn in order, so a key's waiters don't all wake and
//! check at once.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{Mutex as Gate, OwnedMutexGuard};

/// The queues of one limiter (and its clones), by a keyed hash of the key:
/// two keys whose 64-bit hashes collide share a queue, which costs them
/// order, never correctness. Holds an entry per key with waiters; dead
/// entries left by cancelled waits are swept when the map has doubled.
#[derive(Default)]
pub(crate) struct Queues {
    hasher: RandomState,
    gates: Mutex<Gates>,
}

#[derive(Default)]
struct Gates {
    by_hash: HashMap<u64, Weak<Gate<()>>>,
    sweep_at: usize,
}

/// A waiter's turn at the head of its key's queue; gives it up on drop.
pub(crate) struct Turn<'a> {
    queues: &'a Queues,
    hash: u64,
    held: Option<OwnedMutexGuard<()>>,
}

impl Queues {
    /// Waits for the turn of `key` (first come, first served: tokio's
    /// mutex is fair).
    pub(crate) async fn turn<K: Hash + ?Sized>(&self, key: &K) -> Turn<'_> {
        let hash = self.hasher.hash_one(key);
        let gate = {
            let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
            let live = gates.by_hash.get(&hash).and_then(Weak::upgrade);
            match live {
                Some(gate) => gate,
                None => {
                    let gate = Arc::new(Gate::new(()));
                    gates.by_hash.insert(hash, Arc::downgrade(&gate));
                    if gates.by_hash.len() > gates.sweep_at {
                        gates.by_hash.retain(|_, g| g.strong_count() > 0);
                        gates.sweep_at = (gates.by_hash.len() * 2).max(64);
                    }
                    gate
                }
            }
        };
        let mut turn = Turn {
            queues: self,
            hash,
            held: None,
        };
        turn.held = Some(gate.lock_owned().await);
        turn
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.gates.lock().unwrap().by_hash.len()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        // Release, then forget the key if nobody else waits on it.
        drop(self.held.take());
        let mut gates = self.queues.gates.lock().unwrap_or_else(|e| e.into_inner());
        if gates
            .by_hash
            .get(&self.hash)
            .is_some_and(|g| g.strong_count() == 0)
        {
            gates.by_hash.remove(&self.hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_live_only_while_someone_waits() {
        let queues = Queues::default();
        let a = queues.turn("a").await;
        let b = queues.turn("b").await;
        assert_eq!(queues.len(), 2);
        drop(a);
        drop(b);
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_leaves_nothing_behind_for_long() {
        let queues = Queues::default();
        let held = queues.turn("a").await;
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(1), queues.turn("a")).await;
        assert!(cancelled.is_err());
        drop(held);
        // Whatever a cancelled wait leaves, sweeps bound it: 1000 keys
        // waited for one at a time leave at most a few entries.
        for i in 0..1000 {
            drop(queues.turn(&i).await);
        }
        assert!(queues.len() <= 1, "{}", queues.len());
    }
}
