//! A once-a-minute `info` line per limit with how many requests it
//! refused, so that limiting shows at `info` without a line per request.
//!
//! Each thread counts a limit's refusals on its own and adds them to the
//! limit's shared count at most once a second or every 64 refusals, so a
//! flood on every core writes no shared line per request. The line is
//! logged by the first refusal (on any thread) a minute or more after the
//! previous line, with what was counted since: a refusal still held by a
//! thread that refuses nothing more is reported with that thread's next.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How often a limit's line is logged at most (ns).
const EVERY: u64 = 60_000_000_000;
/// How long a thread holds refusals before adding them (ns).
const FLUSH_AFTER: u64 = 1_000_000_000;
/// How many refusals a thread holds at most before adding them.
const FLUSH_AT: u64 = 64;

/// One limit's count of refusals since its last line.
#[derive(Debug)]
pub(crate) struct Summary {
    name: &'static str,
    limited: AtomicU64,
    /// When the last line was logged (ns of the layer's clock; 0: never).
    last: AtomicU64,
}

/// What this thread holds: for which summary, how many, since when.
#[derive(Clone, Copy)]
struct Held {
    summary: Option<&'static Summary>,
    count: u64,
    since: u64,
}

thread_local! {
    static HELD: Cell<Held> = const {
        Cell::new(Held { summary: None, count: 0, since: 0 })
    };
}

impl Summary {
    /// A summary for the limit `name`, kept for the life of the program
    /// (threads hold pointers to it).
    pub(crate) fn leak(name: &'static str) -> &'static Self {
        Box::leak(Box::new(Self {
            name,
            limited: AtomicU64::new(0),
            last: AtomicU64::new(0),
        }))
    }

    /// Counts one refusal at `now` (ns of the layer's clock).
    #[inline]
    pub(crate) fn refused(&'static self, now: u64) {
        let held = HELD.with(Cell::get);
        let mine = held.summary.is_some_and(|s| std::ptr::eq(s, self));
        if mine && held.count < FLUSH_AT && now.saturating_sub(held.since) < FLUSH_AFTER {
            HELD.with(|h| {
                h.set(Held {
                    count: held.count + 1,
                    ..held
                })
            });
            return;
        }
        if let Some(other) = held.summary {
            if held.count > 0 {
                other.add(held.count, now);
            }
        }
        HELD.with(|h| {
            h.set(Held {
                summary: Some(self),
                count: 0,
                since: now,
            })
        });
        self.add(1, now);
    }

    /// Adds `n` refusals, and logs the line if a minute has passed.
    fn add(&self, n: u64, now: u64) {
        self.limited.fetch_add(n, Ordering::Relaxed);
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < EVERY {
            return;
        }
        if self
            .last
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let limited = self.limited.swap(0, Ordering::Relaxed);
            tracing::info!(limit = %self.name, limited, "requests refused by this limit since its last summary (at most one line a minute)");
        }
    }
}
