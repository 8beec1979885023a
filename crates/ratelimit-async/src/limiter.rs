//! [`Limiter`]: a store and a clock, with a wait for a permit.

use crate::jitter;
use crate::queue::Queues;
use ratelimit_core::{Clock, Decision, Store, StoreError, SystemClock};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Why [`Limiter::until_ready`] gave up.
///
/// ```
/// use ratelimit_async::{Limiter, WaitError};
/// use ratelimit_core::{Gcra, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let limiter = Limiter::new(MemoryStore::new(Gcra::new(3, Duration::from_secs(1)).unwrap()));
/// let err = limiter.until_ready(&"key".to_string(), 5).await.unwrap_err();
/// assert_eq!(err, WaitError::Never { cost: 5, limit: 3 });
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitError {
    /// The store failed (Redis down, timed out, breaker open): nothing
    /// was decided, and nothing waited for.
    Store(StoreError),
    /// The request can never be admitted: its `cost` is above the
    /// limit's capacity `limit`.
    Never {
        /// The cost asked for.
        cost: u64,
        /// The limit's capacity.
        limit: u64,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Store(e) => write!(f, "rate-limit store failed: {e}"),
            Self::Never { cost, limit } => write!(
                f,
                "a cost of {cost} can never be admitted by a limit of capacity {limit}"
            ),
        }
    }
}

impl std::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            Self::Never { .. } => None,
        }
    }
}

impl From<StoreError> for WaitError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// A rate limit for any async code: a [`Store`] (the memory store, the
/// Redis store, any other) and the [`Clock`] its `now` comes from.
///
/// [`check`](Self::check) decides at once; [`until_ready`](Self::until_ready)
/// sleeps (tokio's timer, never a busy loop) until the store admits.
/// Clones share the store and the clock.
///
/// ```
/// use ratelimit_async::Limiter;
/// use ratelimit_core::{Gcra, MemoryStore, TokioClock};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 50 per second per tenant, no burst beyond one; on tokio's clock,
/// // which this example pauses.
/// let limiter = Limiter::new(MemoryStore::new(Gcra::with_burst(50, Duration::from_secs(1), 1)?))
///     .clock(TokioClock::new());
/// let start = tokio::time::Instant::now();
/// for _ in 0..3 {
///     limiter.until_ready(&"tenant-a", 1).await?;
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(40)); // 0, 20 and 40 ms
/// # let _: &Limiter<&str, MemoryStore<Gcra, &str>> = &limiter;
/// # Ok(())
/// # }
/// ```
pub struct Limiter<K: ?Sized, S> {
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    jitter: Duration,
    queues: Arc<Queues>,
    key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, S> Clone for Limiter<K, S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            clock: self.clock.clone(),
            jitter: self.jitter,
            queues: self.queues.clone(),
            key: PhantomData,
        }
    }
}

impl<K: ?Sized, S> fmt::Debug for Limiter<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("store", &std::any::type_name::<S>())
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl<K, S> Limiter<K, S>
where
    K: ?Sized,
    S: Store<K>,
{
    /// A limiter on `store` with the system clock ([`SystemClock`]), the
    /// default of every layer of tower-ratelimit too: a
    /// [`MemoryStore`](ratelimit_core::MemoryStore) shared with them
    /// agrees on the time. `store` is a store, or an `Arc` of one shared
    /// with other users. Waits are slept on tokio's timer.
    pub fn new(store: impl Into<Arc<S>>) -> Self {
        Self {
            store: store.into(),
            clock: SystemClock::new().into_shared(),
            jitter: Duration::ZERO,
            queues: Arc::default(),
            key: PhantomData,
        }
    }

    /// The clock `now` comes from (default: the [`SystemClock`]; tests
    /// give a [`TokioClock`](ratelimit_core::TokioClock), which follows
    /// `tokio::time::pause`), or an `Arc<dyn Clock>` shared with other
    /// users of the store, as a layer's `clock` takes it.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = clock.into_shared();
        self
    }

    /// Adds a random delay, uniform in `[0, max]`, to every wait of
    /// [`until_ready`](Self::until_ready), so that waiters denied together
    /// don't all come back at the same instant. Zero (the default) waits
    /// exactly the decision's wait.
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The time of the limiter's clock, in nanoseconds since its origin.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Decides `cost` for `key` now: admitted or not, with the wait of a
    /// denial. An admission takes the permit.
    pub async fn check(&self, key: &K, cost: u64) -> Result<Decision, StoreError> {
        self.store.check(key, cost, self.clock.now()).await
    }

    /// Waits until `cost` for `key` is admitted, then returns the
    /// admitting decision.
    ///
    /// Waiters on one key (through this limiter and its clones) queue up
    /// and take turns in the order they came: only the one at the head
    /// checks the store, and each denial is slept for exactly its wait
    /// (plus the [`jitter`](Self::jitter), if any) on tokio's timer, then
    /// checked again. So concurrent waiters are admitted at exactly the
    /// limit's pace, first come first served, with one check per wait
    /// rather than one per waiter. (Other users of the store — another
    /// process on Redis, `check` — may take a permit first; the head
    /// waiter then sleeps for the new wait.) A leaky bucket's admission
    /// is held for its hold before this returns, while the next waiter
    /// takes its turn.
    ///
    /// Tokio's timer has a resolution of 1 ms, so a wait ends up to about
    /// 2 ms late (1 ms typically). Under a GCRA or token bucket with a
    /// burst of 1 that lateness carries over to every later admission
    /// (each counts from the one before); a burst of 2 or more absorbs it
    /// and keeps the exact long-run rate.
    ///
    /// Cancel-safe: dropping the future while it sleeps takes nothing; a
    /// leaky-bucket admission dropped during its hold is refunded. (A
    /// remote store's check already sent when the future is dropped may
    /// still be counted by the server.)
    ///
    /// # Errors
    ///
    /// [`WaitError::Never`] at once when `cost` is above the capacity,
    /// [`WaitError::Store`] when the store fails (no retry: wrap the call
    /// if you want one).
    pub async fn until_ready(&self, key: &K, cost: u64) -> Result<Decision, WaitError>
    where
        K: Hash,
    {
        let turn = self.queues.turn(key).await;
        loop {
            let now = self.clock.now();
            let decision = self.store.check(key, cost, now).await?;
            if decision.allowed {
                drop(turn);
                let hold = decision.hold();
                if !hold.is_zero() {
                    let refund = RefundOnDrop {
                        limiter: Some(self),
                        key,
                        cost,
                        admitted_at: now,
                    };
                    tokio::time::sleep(hold).await;
                    refund.disarm();
                }
                return Ok(decision);
            }
            let Some(wait) = decision.wait else {
                return Err(WaitError::Never {
                    cost,
                    limit: decision.limit,
                });
            };
            tokio::time::sleep(wait + jitter::up_to(self.jitter)).await;
        }
    }
}

/// Refunds a held admission whose wait was dropped.
struct RefundOnDrop<'a, K: ?Sized, S: Store<K>> {
    limiter: Option<&'a Limiter<K, S>>,
    key: &'a K,
    cost: u64,
    admitted_at: u64,
}

impl<K: ?Sized, S: Store<K>> RefundOnDrop<'_, K, S> {
    fn disarm(mut self) {
        self.limiter = None;
    }
}

/// Logs the failure of a dropped wait's refund, if it failed.
fn refund_done(done: Result<(), StoreError>) {
    if let Err(e) = done {
        tracing::debug!(error = %e, "refund of a dropped wait failed");
    }
}

impl<K: ?Sized, S: Store<K>> Drop for RefundOnDrop<'_, K, S> {
    fn drop(&mut self) {
        let Some(limiter) = self.limiter else { return };
        let refund =
            limiter
                .store
                .refund(self.key, self.cost, self.admitted_at, limiter.clock.now());
        // The memory store refunds in `refund` itself; a remote store's
        // future has to run, so it runs on its own.
        let pending = match refund.into_ready() {
            Ok(done) => return refund_done(done),
            Err(pending) => pending,
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { refund_done(pending.await) });
        }
    }
}
