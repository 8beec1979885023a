//! [`AdaptiveLimit`]: a concurrency limit that follows measured latency
//! (AIMD of each round's p99 against a target), and [`Capacity`], the concurrency a fair queue
//! serves.

use super::FairQueueBuildError;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How many requests a [`FairQueue`](super::FairQueue) lets into its inner
/// service at once: a fixed number, or what an [`AdaptiveLimit`] says now.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::fair::{AdaptiveLimit, Capacity};
///
/// assert_eq!(Capacity::from(4).limit(), 4);
/// let adaptive = AdaptiveLimit::builder(Duration::from_millis(50)).initial(8).build().unwrap();
/// assert_eq!(Capacity::from(adaptive).limit(), 8);
/// ```
#[derive(Debug, Clone)]
pub enum Capacity {
    /// At most this many (0 admits nothing: every request waits, then
    /// times out).
    Fixed(usize),
    /// At most the adaptive limit's current value; the queue reports each
    /// request's latency to it.
    Adaptive(AdaptiveLimit),
}

impl Capacity {
    /// The limit now.
    pub fn limit(&self) -> usize {
        match self {
            Self::Fixed(n) => *n,
            Self::Adaptive(a) => a.current(),
        }
    }

    pub(super) fn sample(&self, started: Instant, latency: Duration, in_flight: usize) {
        if let Self::Adaptive(a) = self {
            a.sample(started, latency, in_flight);
        }
    }
}

impl From<usize> for Capacity {
    fn from(n: usize) -> Self {
        Self::Fixed(n)
    }
}

impl From<AdaptiveLimit> for Capacity {
    fn from(a: AdaptiveLimit) -> Self {
        Self::Adaptive(a)
    }
}

/// A concurrency limit that follows measured latency: additive increase,
/// multiplicative decrease (AIMD) of the p99 latency of each round against
/// a target, within a minimum and a maximum.
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::fair::AdaptiveLimit;
///
/// let limit = AdaptiveLimit::builder(Duration::from_millis(130))
///     .min(2)
///     .max(200)
///     .initial(10)
///     .build()
///     .unwrap();
/// assert_eq!(limit.current(), 10);
/// assert_eq!(limit.target(), Duration::from_millis(130));
/// ```
///
/// The p99 of the requests it admits stays within the target, and the
/// limit settles where throughput stops growing with concurrency. How a
/// round moves the limit is in
/// [`docs/design/adaptive-limit.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/design/adaptive-limit.md).
///
/// The handle is cheap to clone; clones share the limit. Give it to one
/// [`FairQueueLayer`](super::FairQueueLayer) (with
/// [`FairQueueBuilder::adaptive`](super::FairQueueBuilder::adaptive)),
/// which then serves its current capacity, fairly across keys; or use
/// [`AdaptiveLimit::layer`] for a limit that answers 503 at once when
/// full, without a queue. (Each queue counts its own requests in flight:
/// a limit given to two queues lets each run up to it.)
///
/// The limit is traced (`debug`) when its integer value changes and, with
/// the `metrics` feature, exported as the gauge `ratelimit_adaptive_limit`
/// labelled `limit` by the [name](AdaptiveLimitBuilder::name).
#[derive(Clone)]
pub struct AdaptiveLimit {
    inner: Arc<Inner>,
}

struct Inner {
    name: &'static str,
    target: Duration,
    min: usize,
    max: usize,
    backoff: f64,
    current: AtomicUsize,
    state: Mutex<AimdState>,
}

/// The most samples in a round: bounds its memory whatever the maximum.
const ROUND_MAX: usize = 1000;
/// Rounds to wait before probing a level that broke the target again: the
/// first time, and at most.
const PROBE_WAIT: (u32, u32) = (4, 256);

struct AimdState {
    limit: f64,
    /// When the round began: samples of requests admitted before are not
    /// counted (they measured an older limit).
    round_start: Instant,
    /// The round's latencies.
    samples: Vec<Duration>,
    /// Its samples over the target.
    slow: usize,
    /// The most in flight when one of its requests started.
    busy: usize,
    /// The level below the current one and the p99 of its last round, if
    /// the limit grew from it.
    below: Option<(usize, Duration)>,
    /// The last level that broke the target, while it holds.
    ceiling: Option<Ceiling>,
}

/// A level that broke the target.
struct Ceiling {
    level: usize,
    /// Rounds to wait before probing it again.
    wait: u32,
    /// The wait it was given.
    given: u32,
}

impl AimdState {
    /// Samples in a round at this limit: as many as may run at once.
    fn round_len(&self) -> usize {
        (self.limit as usize).clamp(1, ROUND_MAX)
    }

    /// The round ends now: its p99 over the target makes the limit
    /// smaller; within it, and the last step up paid, larger (unless the
    /// next level is a ceiling still to wait for).
    fn end_round(&mut self, i: &Inner, now: Instant) {
        let level = self.limit as usize;
        if self.slow > allowance(self.round_len()) {
            self.limit = (self.limit * i.backoff).max(i.min as f64);
            let given = match &self.ceiling {
                Some(c) if level <= c.level => (c.given * 2).min(PROBE_WAIT.1),
                _ => PROBE_WAIT.0,
            };
            self.ceiling = Some(Ceiling {
                level,
                wait: given,
                given,
            });
            self.below = None;
        } else if self.busy as f64 * 2.0 >= self.limit {
            let p99 = p99(&mut self.samples);
            // level / p99 >= below / its p99: the step raised throughput.
            let paid = |&(below, then): &(usize, Duration)| {
                p99.as_nanos() * below as u128 <= then.as_nanos() * level as u128
            };
            if self.below.as_ref().is_none_or(paid) {
                self.grow(i, level, p99);
            }
        }
        self.round_start = now;
        self.samples.clear();
        self.slow = 0;
        self.busy = 0;
    }

    /// One more, unless the next level is a ceiling still to wait for.
    fn grow(&mut self, i: &Inner, level: usize, p99: Duration) {
        if self.ceiling.as_ref().is_some_and(|c| level >= c.level) {
            // The ceiling held the target this time: it is gone.
            self.ceiling = None;
        }
        if let Some(c) = self.ceiling.as_mut().filter(|c| level + 1 >= c.level) {
            if c.wait > 0 {
                c.wait -= 1;
                return;
            }
        }
        self.limit = (self.limit + 1.0).min(i.max as f64);
        if self.limit as usize > level {
            self.below = Some((level, p99));
        }
    }
}

/// How many samples of a round of `n` may be over the target with its p99
/// within it.
fn allowance(n: usize) -> usize {
    n - (n * 99).div_ceil(100)
}

/// The p99 of `samples` (not empty), reordering them.
fn p99(samples: &mut [Duration]) -> Duration {
    let i = (samples.len() * 99).div_ceil(100).max(1) - 1;
    *samples.select_nth_unstable(i).1
}

impl fmt::Debug for AdaptiveLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimit")
            .field("name", &self.inner.name)
            .field("target", &self.inner.target)
            .field("min", &self.inner.min)
            .field("max", &self.inner.max)
            .field("current", &self.current())
            .finish()
    }
}

/// Builds an [`AdaptiveLimit`]; see [`AdaptiveLimit::builder`].
///
/// ```
/// use std::time::Duration;
/// use tower_ratelimit::fair::{AdaptiveLimit, FairQueueBuildError};
///
/// let builder = AdaptiveLimit::builder(Duration::from_millis(50)).name("search");
/// assert_eq!(builder.clone().min(4).build().unwrap().current(), 10);
/// let err = builder.min(10).max(5).build().unwrap_err();
/// assert_eq!(err, FairQueueBuildError::MaxBelowMin { min: 10, max: 5 });
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveLimitBuilder {
    name: &'static str,
    target: Duration,
    min: usize,
    max: usize,
    initial: Option<usize>,
    backoff: f64,
}

impl AdaptiveLimit {
    /// A limit aiming at a p99 of `target` latency; by default between 1
    /// and 1,000, starting at 10 (or the minimum, if larger), backing off
    /// by 0.9.
    pub fn builder(target: Duration) -> AdaptiveLimitBuilder {
        AdaptiveLimitBuilder {
            name: "adaptive",
            target,
            min: 1,
            max: 1000,
            initial: None,
            backoff: 0.9,
        }
    }

    /// The limit now.
    pub fn current(&self) -> usize {
        self.inner.current.load(Ordering::Relaxed)
    }

    /// The latency target.
    pub fn target(&self) -> Duration {
        self.inner.target
    }

    /// A latency sample: a request admitted at `started`, when `in_flight`
    /// requests (itself included) ran, took `latency`.
    pub fn sample(&self, started: Instant, latency: Duration, in_flight: usize) {
        let i = &*self.inner;
        let mut st = i.state.lock().unwrap_or_else(PoisonError::into_inner);
        if started < st.round_start {
            return;
        }
        let before = st.limit;
        st.samples.push(latency);
        st.slow += usize::from(latency > i.target);
        st.busy = st.busy.max(in_flight);
        let len = st.round_len();
        if st.samples.len() >= len || st.slow > allowance(len) {
            st.end_round(i, Instant::now());
        }
        if st.limit != before {
            let new = st.limit as usize;
            if i.current.swap(new, Ordering::Relaxed) != new {
                tracing::debug!(
                    limit = i.name,
                    from = before as usize,
                    to = new,
                    ?latency,
                    "adaptive concurrency limit changed"
                );
                #[cfg(feature = "metrics")]
                metrics::gauge!(crate::observe::names::ADAPTIVE_LIMIT, "limit" => i.name)
                    .set(new as f64);
            }
        }
    }
}

impl AdaptiveLimitBuilder {
    /// The name in traces and the metric's `limit` label (`"adaptive"`).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The smallest limit (at least 1; 1 by default).
    pub fn min(mut self, min: usize) -> Self {
        self.min = min;
        self
    }

    /// The largest limit (1,000 by default).
    pub fn max(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// The starting limit (10, or the minimum if larger, by default).
    pub fn initial(mut self, initial: usize) -> Self {
        self.initial = Some(initial);
        self
    }

    /// The ratio a slow round multiplies the limit by (0.9 by default;
    /// strictly between 0 and 1).
    pub fn backoff(mut self, ratio: f64) -> Self {
        self.backoff = ratio;
        self
    }

    /// The limit, or what is wrong with its settings.
    pub fn build(self) -> Result<AdaptiveLimit, FairQueueBuildError> {
        if self.min == 0 {
            return Err(FairQueueBuildError::ZeroMinimum);
        }
        if self.max < self.min {
            return Err(FairQueueBuildError::MaxBelowMin {
                min: self.min,
                max: self.max,
            });
        }
        if self.target.is_zero() {
            return Err(FairQueueBuildError::ZeroTarget);
        }
        if !(self.backoff > 0.0 && self.backoff < 1.0) {
            return Err(FairQueueBuildError::Backoff(self.backoff));
        }
        let initial = self.initial.unwrap_or(10).clamp(self.min, self.max);
        #[cfg(feature = "metrics")]
        metrics::gauge!(crate::observe::names::ADAPTIVE_LIMIT, "limit" => self.name)
            .set(initial as f64);
        Ok(AdaptiveLimit {
            inner: Arc::new(Inner {
                name: self.name,
                target: self.target,
                min: self.min,
                max: self.max,
                backoff: self.backoff,
                current: AtomicUsize::new(initial),
                state: Mutex::new(AimdState {
                    limit: initial as f64,
                    round_start: Instant::now(),
                    samples: Vec::new(),
                    slow: 0,
                    busy: 0,
                    below: None,
                    ceiling: None,
                }),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let t = Duration::from_millis(10);
        assert_eq!(
            AdaptiveLimit::builder(t).min(0).build().unwrap_err(),
            FairQueueBuildError::ZeroMinimum
        );
        assert_eq!(
            AdaptiveLimit::builder(t).min(5).max(4).build().unwrap_err(),
            FairQueueBuildError::MaxBelowMin { min: 5, max: 4 }
        );
        assert_eq!(
            AdaptiveLimit::builder(Duration::ZERO).build().unwrap_err(),
            FairQueueBuildError::ZeroTarget
        );
        assert!(AdaptiveLimit::builder(t).backoff(1.0).build().is_err());
        let a = AdaptiveLimit::builder(t).min(3).initial(1).build().unwrap();
        assert_eq!(a.current(), 3);
    }

    /// One round at the current limit: every request admitted now, all
    /// in flight, each taking `latency(limit)`.
    async fn round(a: &AdaptiveLimit, latency: impl Fn(usize) -> Duration) {
        let n = a.current();
        let started = Instant::now();
        tokio::time::advance(latency(n)).await;
        for _ in 0..n {
            a.sample(started, latency(n), n);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn aimd_within_bounds() {
        let t = Duration::from_millis(10);
        let a = AdaptiveLimit::builder(t).min(2).max(12).build().unwrap();
        // Fast and busy: one more per round, up to the maximum, not past it.
        round(&a, |_| t / 2).await;
        assert_eq!(a.current(), 11);
        for _ in 0..10 {
            round(&a, |_| t / 2).await;
        }
        assert_eq!(a.current(), 12);
        // Fast but idle: stays.
        for _ in 0..24 {
            a.sample(Instant::now(), t / 2, 1);
        }
        assert_eq!(a.current(), 12);
        // One slow batch: one decrease, however many samples it has.
        let started = Instant::now();
        tokio::time::advance(t * 2).await;
        for _ in 0..12 {
            a.sample(started, t * 2, 12);
        }
        assert_eq!(a.current(), 10); // 12 * 0.9 = 10.8
                                     // Slow requests admitted after it decrease again, down to the minimum.
        for _ in 0..100 {
            round(&a, |_| t * 2).await;
        }
        assert_eq!(a.current(), 2);
    }

    /// A round of 100 samples or more tolerates its 1 % of slow ones.
    #[tokio::test(start_paused = true)]
    async fn a_round_is_judged_by_its_p99() {
        let t = Duration::from_millis(10);
        let a = AdaptiveLimit::builder(t).initial(200).build().unwrap();
        let started = Instant::now();
        tokio::time::advance(t).await;
        for i in 0..200 {
            let slow = i % 100 == 0;
            a.sample(started, if slow { t * 2 } else { t / 2 }, 200);
        }
        assert_eq!(a.current(), 201);
        let started = Instant::now();
        for _ in 0..3 {
            a.sample(started, t * 2, 201);
        }
        assert_eq!(a.current(), 180); // 201 * 0.9, at its third slow sample
    }

    /// Past a backend's capacity, where latency grows faster than the
    /// limit, the limit stops growing, however loose the target.
    #[tokio::test(start_paused = true)]
    async fn growth_stops_where_throughput_does() {
        let base = Duration::from_millis(10);
        // 20 at once in 10 ms; past that, latency grows as the square.
        let backend = |n: usize| base.mul_f64((n as f64 / 20.0).max(1.0).powi(2));
        let a = AdaptiveLimit::builder(base * 10).build().unwrap();
        for _ in 0..1000 {
            round(&a, backend).await;
        }
        assert_eq!(a.current(), 21);
        // Where latency grows slower than the limit, up to the target.
        let gentle = |n: usize| base + Duration::from_micros(n as u64 * 100);
        let a = AdaptiveLimit::builder(base * 3).build().unwrap();
        for _ in 0..1000 {
            round(&a, gentle).await;
        }
        // 10 ms + 200 * 0.1 ms = 30 ms; 201 breaks it, and backs off to 180.
        assert!((180..=201).contains(&a.current()), "{}", a.current());
    }

    /// A level that broke the target is probed again ever more rarely: after
    /// 4, 8, 16, ... rounds, at most 256.
    #[tokio::test(start_paused = true)]
    async fn a_ceiling_is_probed_ever_more_rarely() {
        let t = Duration::from_millis(10);
        let a = AdaptiveLimit::builder(t).initial(12).build().unwrap();
        let backend = |n: usize| if n >= 13 { t * 2 } else { t / 2 };
        let mut probes = 0;
        for _ in 0..2000 {
            round(&a, backend).await;
            probes += usize::from(a.current() >= 13);
            assert!(a.current() <= 13);
        }
        // 4, 8, 16, 32, 64, 128, then 256 rounds apart (and a few rounds to
        // come back from each backoff): about 13, where probing every few
        // rounds would make hundreds.
        assert!((8..=15).contains(&probes), "{probes} probes");
        // The backend gets faster: the ceiling lifts at the next probe.
        for _ in 0..300 {
            round(&a, |_| t / 2).await;
        }
        assert!(a.current() > 13, "{}", a.current());
    }
}
