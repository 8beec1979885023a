//! A store's side of write-backs (see `write_back`): the bans and
//! denials it holds, the loss marker it read last, and when it read it.

use crate::fleet::held::Held;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// A store's side of write-backs: what it holds, and the marker it read
/// last.
pub(crate) struct WriteBack {
    pub(crate) held: Held,
    pub(crate) epoch: Mutex<Option<String>>,
    /// A loss was seen, and not every key held is written back yet.
    pub(crate) owed: AtomicBool,
    pub(crate) last: Mutex<Option<Instant>>,
    pub(crate) running: AtomicBool,
}

impl WriteBack {
    pub(crate) fn new() -> Self {
        Self {
            held: Held::new(),
            epoch: Mutex::new(None),
            owed: AtomicBool::new(false),
            last: Mutex::new(None),
            running: AtomicBool::new(false),
        }
    }

    /// Whether the marker was last read `every` ago or more, and no
    /// write-back runs; if so, one is marked as starting now.
    pub(crate) fn due(&self, every: Duration) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|t| t.elapsed() < every) || self.running.load(Ordering::Acquire) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}
