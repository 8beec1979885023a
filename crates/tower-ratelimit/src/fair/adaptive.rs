//! [`AdaptiveLimit`]: a concurrency limit that follows measured latency
//! (AIMD against a target), and [`Capacity`], the concurrency a fair queue
//! serves.

use super::FairConfigError;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How many requests a [`FairQueue`](super::FairQueue) lets into its inner
/// service at once: a fixed number, or what an [`AdaptiveLimit`] says now.
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
/// multiplicative decrease (AIMD) against a latency target, within a
/// minimum and a maximum.
///
/// Each completed request is a sample of its latency in the inner service
/// (from its admission to its response, queueing excluded):
///
/// - slower than the target: the limit is multiplied by the backoff ratio
///   (0.9 by default), at most once per batch: requests that started before
///   the last decrease do not decrease it again;
/// - within the target, and the limit was in use (at least half of it in
///   flight when the request started): the limit grows by `1 / limit`,
///   about one per round trip.
///
/// So the limit settles where latency meets the target: on a backend whose
/// latency grows with concurrency past its capacity, just past that
/// capacity. The handle is cheap to clone; clones share the limit. Give it
/// to one [`FairQueueLayer`](super::FairQueueLayer) (with
/// [`FairQueueBuilder::adaptive`](super::FairQueueBuilder::adaptive)),
/// which then serves its current capacity, fairly across keys; or use
/// [`AdaptiveLimit::layer`] for a limit that answers 503 at once when
/// full, without a queue. (Each queue counts its own requests in flight:
/// a limit given to two queues lets each run up to it.)
///
/// The limit is traced (`debug`) when its integer value changes and, with
/// the `metrics` feature, exported as the gauge `ratelimit_adaptive_limit`
/// labelled `limit` by the [name](AdaptiveLimitBuilder::name).
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
/// ```
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

struct AimdState {
    limit: f64,
    last_decrease: Option<Instant>,
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
    /// A limit aiming at `target` latency; by default between 1 and 1,000,
    /// starting at 10 (or the minimum, if larger), backing off by 0.9.
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
        let before = st.limit;
        if latency > i.target {
            if st.last_decrease.is_none_or(|t| started >= t) {
                st.limit = (st.limit * i.backoff).max(i.min as f64);
                st.last_decrease = Some(Instant::now());
            }
        } else if in_flight as f64 * 2.0 >= st.limit {
            st.limit = (st.limit + 1.0 / st.limit).min(i.max as f64);
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
                metrics::gauge!("ratelimit_adaptive_limit", "limit" => i.name).set(new as f64);
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

    /// The ratio a slow sample multiplies the limit by (0.9 by default;
    /// strictly between 0 and 1).
    pub fn backoff(mut self, ratio: f64) -> Self {
        self.backoff = ratio;
        self
    }

    /// The limit, or what is wrong with its settings.
    pub fn build(self) -> Result<AdaptiveLimit, FairConfigError> {
        if self.min == 0 {
            return Err(FairConfigError::ZeroMinimum);
        }
        if self.max < self.min {
            return Err(FairConfigError::MaxBelowMin {
                min: self.min,
                max: self.max,
            });
        }
        if self.target.is_zero() {
            return Err(FairConfigError::ZeroTarget);
        }
        if !(self.backoff > 0.0 && self.backoff < 1.0) {
            return Err(FairConfigError::Backoff(self.backoff));
        }
        let initial = self.initial.unwrap_or(10).clamp(self.min, self.max);
        #[cfg(feature = "metrics")]
        metrics::gauge!("ratelimit_adaptive_limit", "limit" => self.name).set(initial as f64);
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
                    last_decrease: None,
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
            FairConfigError::ZeroMinimum
        );
        assert_eq!(
            AdaptiveLimit::builder(t).min(5).max(4).build().unwrap_err(),
            FairConfigError::MaxBelowMin { min: 5, max: 4 }
        );
        assert_eq!(
            AdaptiveLimit::builder(Duration::ZERO).build().unwrap_err(),
            FairConfigError::ZeroTarget
        );
        assert!(AdaptiveLimit::builder(t).backoff(1.0).build().is_err());
        let a = AdaptiveLimit::builder(t).min(3).initial(1).build().unwrap();
        assert_eq!(a.current(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn aimd_within_bounds() {
        let t = Duration::from_millis(10);
        let a = AdaptiveLimit::builder(t).min(2).max(12).build().unwrap();
        // Fast and busy: grows to the maximum, not past it.
        for _ in 0..1000 {
            a.sample(Instant::now(), t / 2, a.current());
        }
        assert_eq!(a.current(), 12);
        // Fast but idle: stays.
        a.sample(Instant::now(), t / 2, 1);
        assert_eq!(a.current(), 12);
        // One slow batch: one decrease, however many samples it has.
        let started = Instant::now();
        tokio::time::advance(t * 2).await;
        for _ in 0..12 {
            a.sample(started, t * 2, 12);
        }
        assert_eq!(a.current(), 10); // 12 * 0.9 = 10.8
                                     // Slow requests started after it decrease again, down to the minimum.
        for _ in 0..100 {
            tokio::time::advance(t).await;
            a.sample(Instant::now(), t * 2, 12);
        }
        assert_eq!(a.current(), 2);
    }
}
