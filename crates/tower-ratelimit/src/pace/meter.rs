//! [`Meter`]: cuts a body's data into pieces and lets each go once the key's budget admits it, sleeping out each denial.

use super::budget::{Budget, BudgetFuture};
use crate::observe;
use bytes::Bytes;
use ratelimit_core::{Clock, Decision, StoreError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

/// The shortest sleep after a denial, so that a store answering "denied,
/// wait 0" cannot make a body spin.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// What a paced body charges with: the key's budget and the layer's
/// settings.
pub(crate) struct Meter {
    budget: Arc<dyn Budget>,
    clock: Arc<dyn Clock>,
    name: &'static str,
    /// The largest piece charged at once (cut to the limit's capacity when
    /// a denial says a piece can never fit).
    piece: u64,
    /// Bytes still let through unpaced (`after`).
    free: u64,
    /// What is left of the data frame being sent.
    rest: Bytes,
    /// The sleep after a denial; kept to be reset, not reallocated.
    sleep: Option<Pin<Box<Sleep>>>,
    sleeping: bool,
    /// A remote store's check in flight, and the piece size it charges.
    checking: Option<(BudgetFuture, u64)>,
}

impl Meter {
    pub(crate) fn new(
        budget: Arc<dyn Budget>,
        clock: Arc<dyn Clock>,
        name: &'static str,
        piece: u64,
        after: u64,
    ) -> Self {
        Self {
            budget,
            clock,
            name,
            piece,
            free: after,
            rest: Bytes::new(),
            sleep: None,
            sleeping: false,
            checking: None,
        }
    }

    /// Whether the current frame is all sent.
    pub(crate) fn is_idle(&self) -> bool {
        self.rest.is_empty()
    }

    /// Bytes held, not yet sent.
    pub(crate) fn held(&self) -> u64 {
        self.rest.len() as u64
    }

    /// Takes the next data frame to send.
    pub(crate) fn load(&mut self, data: Bytes) {
        self.rest = data;
    }

    /// The next piece of the current frame, once the budget admits it.
    /// Call only when not [`is_idle`](Self::is_idle).
    pub(crate) fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        if self.free > 0 {
            let n = self.free.min(self.held());
            self.free -= n;
            return Poll::Ready(self.cut(n));
        }
        loop {
            if self.sleeping {
                if let Some(sleep) = self.sleep.as_mut() {
                    ready!(sleep.as_mut().poll(cx));
                }
                self.sleeping = false;
            }
            let (answer, size) = match self.checking.as_mut() {
                Some((future, size)) => {
                    let answer = ready!(future.as_mut().poll(cx));
                    let size = *size;
                    self.checking = None;
                    (answer, size)
                }
                None => {
                    let size = self.piece.min(self.held());
                    let now = self.clock.now();
                    match self.budget.check(size, now).into_ready() {
                        Ok(answer) => (answer, size),
                        Err(future) => {
                            self.checking = Some((future, size));
                            continue;
                        }
                    }
                }
            };
            if let Some(piece) = self.decided(answer, size) {
                return Poll::Ready(piece);
            }
        }
    }

    /// The piece of `size` bytes if `answer` lets it go; otherwise sets up
    /// the retry (a sleep, or a smaller piece).
    fn decided(&mut self, answer: Result<Decision, StoreError>, size: u64) -> Option<Bytes> {
        match answer {
            Ok(d) if d.allowed => Some(self.cut(size)),
            Ok(d) => match d.wait {
                Some(wait) => {
                    self.sleep_for(wait.max(MIN_SLEEP));
                    None
                }
                // The piece can never fit: charge pieces of the capacity.
                None if d.limit > 0 && d.limit < size => {
                    self.piece = d.limit;
                    None
                }
                // Nothing can ever fit (a capacity of 0): pacing is off.
                None => Some(self.cut(size)),
            },
            Err(e) => {
                // Fail open: the piece goes, and the next one tries again.
                observe::store_error(self.name, &e, true);
                Some(self.cut(size))
            }
        }
    }

    fn sleep_for(&mut self, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.sleeping = true;
    }

    fn cut(&mut self, n: u64) -> Bytes {
        let n = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(self.rest.len());
        self.rest.split_to(n)
    }
}
