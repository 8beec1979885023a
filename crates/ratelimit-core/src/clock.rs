//! Clocks: where the current time comes from.
//!
//! Every algorithm works on a monotonic count of nanoseconds since the
//! clock's origin: the Unix epoch for [`SystemClock`]. The clock is passed in, never read behind the caller's
//! back, so tests and benchmarks can freeze or step time with
//! [`ManualClock`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
#[cfg(not(feature = "quanta"))]
use std::time::Instant;

/// A source of monotonic time, in nanoseconds since the clock's origin.
///
/// ```
/// use ratelimit_core::{Clock, ManualClock};
///
/// fn elapsed(clock: &impl Clock, since: u64) -> u64 {
///     clock.now() - since
/// }
/// let clock = ManualClock::new();
/// clock.advance(std::time::Duration::from_millis(5));
/// assert_eq!(elapsed(&clock, 0), 5_000_000);
/// let fixed = || 42u64; // closures are clocks too
/// assert_eq!(fixed.now(), 42);
/// ```
///
/// Implementations must never go backwards. Closures `Fn() -> u64` are
/// clocks too, and so is an `Arc<dyn Clock>`: a clock shared by several
/// users.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds elapsed since this clock's origin.
    fn now(&self) -> u64;

    /// This clock, shared: in an `Arc`, unless it is one already.
    fn into_shared(self) -> Arc<dyn Clock>
    where
        Self: Sized,
    {
        Arc::new(self)
    }
}

impl Clock for Arc<dyn Clock> {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }

    fn into_shared(self) -> Arc<dyn Clock> {
        self
    }
}

impl<F> Clock for F
where
    F: Fn() -> u64 + Send + Sync + 'static,
{
    #[inline]
    fn now(&self) -> u64 {
        self()
    }
}

/// The system clock: nanoseconds since the Unix epoch, read from the wall
/// clock once per process and carried on by the monotonic clock.
///
/// ```
/// use ratelimit_core::{Clock, SystemClock};
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
/// let now = SystemClock::new().now() / 1_000_000_000;
/// assert!(now.abs_diff(wall.as_secs()) <= 60);
/// ```
///
/// Every `SystemClock` of a process shares one base: the wall-clock time
/// (`SystemTime`) read the first time one is made, and the monotonic
/// clock's reading at that moment. From then on it moves only with the
/// monotonic clock, so it never goes backwards and ignores steps of the
/// wall clock (an NTP correction, a changed date) until the process
/// restarts. Aligned windows therefore end at UTC boundaries (an hourly
/// window at the full hour, a daily one at midnight UTC), as on the Redis
/// store, which reads the server's `TIME`: a fallback between the two moves
/// no reset, except by the difference between the hosts' clocks. A wall
/// clock before 1970 reads as the epoch.
///
/// With the default `quanta` feature it reads the CPU's time-stamp counter
/// through [`quanta`], calibrated once per process against the operating
/// system's monotonic clock (the first `SystemClock::new` takes that time,
/// at most a few hundred milliseconds and usually far less). Where the
/// counter is not invariant, or on other targets, `quanta` reads the
/// operating system's monotonic clock itself. A read is about half the
/// cost of [`std::time::Instant::now`] on x86-64 Linux. Without the feature
/// it reads [`std::time::Instant`].
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    base: &'static Base,
}

/// The process's one reading of the wall clock, with the monotonic clock's
/// reading at that moment.
#[derive(Debug)]
struct Base {
    /// Nanoseconds since the Unix epoch at `origin`.
    epoch: u64,
    #[cfg(feature = "quanta")]
    clock: quanta::Clock,
    #[cfg(feature = "quanta")]
    origin: u64,
    #[cfg(not(feature = "quanta"))]
    origin: Instant,
}

fn base() -> &'static Base {
    static BASE: std::sync::OnceLock<Base> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        #[cfg(feature = "quanta")]
        let (clock, origin) = {
            let clock = quanta::Clock::new();
            let origin = clock.raw();
            (clock, origin)
        };
        #[cfg(not(feature = "quanta"))]
        let origin = Instant::now();
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, crate::plumbing::saturating_nanos);
        Base {
            epoch,
            #[cfg(feature = "quanta")]
            clock,
            origin,
        }
    })
}

impl SystemClock {
    /// The system clock (every one of a process reads the same time).
    pub fn new() -> Self {
        Self { base: base() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> u64 {
        let base = self.base;
        #[cfg(feature = "quanta")]
        // Scaled from the origin; never below 0, even if a core's counter
        // lags the one the origin was read on.
        let elapsed = base.clock.delta_as_nanos(base.origin, base.clock.raw());
        #[cfg(not(feature = "quanta"))]
        let elapsed = crate::plumbing::saturating_nanos(base.origin.elapsed());
        base.epoch.saturating_add(elapsed)
    }
}

/// A clock that only moves when told to. Clones share the same time.
///
/// ```
/// use ratelimit_core::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), 1_500_000_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A manual clock at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = crate::plumbing::saturating_nanos(by);
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Sets the clock to `nanos` since its origin. Going backwards is
    /// ignored, so the clock stays monotonic.
    pub fn set_nanos(&self, nanos: u64) {
        self.nanos.fetch_max(nanos, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_and_monotonic() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(2));
        assert_eq!(b.now(), 2_000_000_000);
        b.set_nanos(5);
        assert_eq!(a.now(), 2_000_000_000);
        a.advance(Duration::MAX);
        assert_eq!(a.now(), u64::MAX);
    }

    #[test]
    fn system_clock_moves_forward() {
        let c = SystemClock::new();
        // The OS clock's span holds ours: read first, and last.
        let wall = std::time::Instant::now();
        let x = c.now();
        assert!(c.now() >= x);
        std::thread::sleep(Duration::from_millis(20));
        let slept = c.now() - x;
        let real = u64::try_from(wall.elapsed().as_nanos()).unwrap();
        assert!(slept >= 19_000_000, "{slept}");
        // Within 5 % of the OS clock.
        assert!(slept <= real + real / 20 + 1_000_000, "{slept} vs {real}");
    }

    #[test]
    fn closures_are_clocks() {
        let c = || 42u64;
        assert_eq!(Clock::now(&c), 42);
    }

    #[test]
    fn a_shared_clock_is_shared_as_it_is() {
        let manual = ManualClock::new();
        let shared: Arc<dyn Clock> = Arc::new(manual.clone());
        let again = Arc::clone(&shared).into_shared();
        assert!(Arc::ptr_eq(&shared, &again), "not wrapped again");
        manual.advance(Duration::from_nanos(7));
        assert_eq!(again.now(), 7);
        assert_eq!(manual.clone().into_shared().now(), 7);
    }
}
