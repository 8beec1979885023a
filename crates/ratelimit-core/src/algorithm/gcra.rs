//! GCRA, the generic cell rate algorithm: `L` per `P` with a burst `B`.

#[cfg(feature = "live")]
use super::interval::word::Word as _;
use super::interval::{ahead, Interval, Refusal, StateWord};
use super::StableKey;
use super::{nonzero, period_nanos, Algorithm};
use crate::{ConfigError, Decision};
use std::time::Duration;

/// GCRA: `limit` per `period`, with up to `burst` at once.
///
/// ```
/// use ratelimit_core::{Algorithm, Gcra};
/// use std::time::Duration;
///
/// let gcra = Gcra::new(3, Duration::from_secs(1)).unwrap();
/// let mut state = gcra.fresh("key", 0);
/// assert!(gcra.check(&mut state, 3, 0).allowed);
/// let denied = gcra.check(&mut state, 1, 0);
/// assert!(!denied.allowed);
/// assert_eq!(denied.wait, Some(Duration::from_nanos(333_333_334)));
///
/// // 30001 per day needs the wide state.
/// let day = Duration::from_secs(86_400);
/// assert!(Gcra::new(30_001, day).is_err());
/// let wide: Gcra<u128> = Gcra::new_wide(30_001, day).unwrap();
/// let mut state = wide.fresh("key", 0);
/// assert_eq!(wide.check(&mut state, 1, 0).remaining, 30_000);
/// ```
///
/// `T = P / L`; the state is the theoretical arrival time `TAT`. A request
/// of cost `n` at `t` is admitted iff `max(TAT, t) + n*T <= t + B*T`.
///
/// # State width
///
/// `Gcra` (that is `Gcra<u64>`) keeps 8 bytes per key: the `TAT` in units
/// of `1 / (L / gcd(L, P))` ns, modulo 2^64. It holds `B * T` up to 2^61 of
/// those units, and refuses wider settings with
/// [`ConfigError::Overflow`] (for instance 30001 per day with the default
/// burst: `B * T` is 2.6 * 10^18 units).
///
/// `Gcra<u128>`, built with [`new_wide`](Gcra::new_wide) or
/// [`with_burst_wide`](Gcra::with_burst_wide), decides exactly the same
/// but keeps 16 bytes per key (a `u128` as `[low, high]` halves) and holds
/// `B * T` up to 2^125 units: every setting whose window `B * T` is a
/// [`Duration`] (up to 584 billion years) and whose period is at most 73
/// years, whatever the burst. [`AnyGcra`](crate::algorithm::AnyGcra) picks the
/// narrowest width that holds a setting.
///
/// (The wide constructors have their own names because `Gcra::new` must
/// keep meaning `Gcra<u64>`: Rust does not use a type parameter's default
/// to pick between two inherent functions of the same name.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra<W: StateWord = u64> {
    interval: Interval<W>,
    burst: u64,
    /// `B * T` in scaled units.
    capacity: W,
    rate: u64,
    period: Duration,
    /// `B * T` as a duration, rounded up (reported in every decision).
    window: Duration,
}

/// What a refused setting is called, for [`ConfigError::Overflow`]:
/// `[the rate, the span]`.
pub(crate) type Names = [&'static str; 2];

const NARROW: Names = [
    "limit / period for the 8-byte state of Gcra (use Gcra<u128>)",
    "burst * period / limit for the 8-byte state of Gcra (use Gcra<u128>)",
];
const WIDE: Names = ["limit / period", "burst * period / limit"];

impl Gcra {
    /// `limit` per `period`, burst `limit`, with an 8-byte state.
    ///
    /// Fails with [`ConfigError::Overflow`] when the 8-byte state cannot
    /// hold the setting: use [`Gcra::new_wide`] or [`AnyGcra`](crate::algorithm::AnyGcra).
    pub fn new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::with_burst(limit, period, limit)
    }

    /// `limit` per `period`, with a burst of `burst`, with an 8-byte state.
    ///
    /// Fails with [`ConfigError::Overflow`] when the 8-byte state cannot
    /// hold the setting: use [`Gcra::with_burst_wide`] or
    /// [`AnyGcra`](crate::algorithm::AnyGcra).
    pub fn with_burst(limit: u64, period: Duration, burst: u64) -> Result<Self, ConfigError> {
        Self::build(limit, period, burst, NARROW)
    }
}

impl Gcra<u128> {
    /// `limit` per `period`, burst `limit`, with a 16-byte state.
    pub fn new_wide(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::with_burst_wide(limit, period, limit)
    }

    /// `limit` per `period`, with a burst of `burst`, with a 16-byte state.
    pub fn with_burst_wide(limit: u64, period: Duration, burst: u64) -> Result<Self, ConfigError> {
        Self::build(limit, period, burst, WIDE)
    }
}

impl<W: StateWord> Gcra<W> {
    pub(crate) fn build(
        limit: u64,
        period: Duration,
        burst: u64,
        names: Names,
    ) -> Result<Self, ConfigError> {
        let limit = nonzero(limit, "limit")?;
        let period_ns = period_nanos(period)?;
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        let refused = |r: Refusal| match r {
            Refusal::Rate => ConfigError::Overflow(names[0]),
            Refusal::Span => ConfigError::Overflow(names[1]),
        };
        let interval = Interval::<W>::new(limit, period_ns).map_err(refused)?;
        let capacity = interval
            .span(W::from_u64(burst))
            .and_then(|c| interval.reportable(c))
            .map_err(refused)?;
        Ok(Self {
            interval,
            burst,
            capacity,
            rate: limit,
            period,
            window: interval.duration_ceil(capacity),
        })
    }

    /// The limit `L`.
    pub fn rate_limit(&self) -> u64 {
        self.rate
    }

    /// The period `P`.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The burst `B`.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// How far max(TAT, t) is ahead of `t`, in scaled units. A state
    /// behind `t` (idle for less than the idle horizon, `2 * MAX_SPAN`
    /// units) reads as more than `MAX_SPAN`, the largest capacity, and
    /// counts as full. A state up to `MAX_SPAN` ahead is used, even beyond
    /// the capacity: a live change to a smaller burst keeps the overshoot
    /// (`LiveAlgorithm`), denied until it drains.
    #[inline(always)]
    fn used_units(&self, state: W, t: W) -> W {
        let ahead = state.wrapping_sub(t);
        if ahead <= W::MAX_SPAN {
            ahead
        } else {
            W::ZERO
        }
    }

    /// The decision for a state holding `used` after this check; `wait` is
    /// `Some(ZERO)` for an admission, and for a denial the units until the
    /// same request fits (`None`: never).
    #[inline(always)]
    fn decision(&self, allowed: bool, used: W, wait: Option<W>) -> Decision {
        let i = &self.interval;
        // Units until a cost-1 request fits (`used + T <= capacity`).
        let need = used + i.step;
        let short = (need > self.capacity).then(|| need - self.capacity);
        let next = short.map_or(Duration::ZERO, |s| i.duration_ceil(s));
        Decision {
            banned: false,
            allowed,
            // At most B; no division when less than one unit is left
            // (every cost-1 denial).
            remaining: match short {
                Some(_) => 0,
                None => i.steps(self.capacity - used).low_u64(),
            },
            wait: match wait {
                Some(w) if w == W::ZERO => Some(Duration::ZERO),
                // A cost-1 denial waits exactly `next`.
                Some(w) if Some(w) == short => Some(next),
                Some(w) => Some(i.duration_ceil(w)),
                None => None,
            },
            limit: self.burst,
            window: self.window,
            reset: i.duration_ceil(used),
            next,
        }
    }
}

impl<W: StateWord> Algorithm for Gcra<W> {
    /// The scaled `TAT`: `u64`, or for `Gcra<u128>` a `u128` as
    /// `[low, high]`.
    type State = W::Stored;

    fn fresh<K: StableKey + ?Sized>(&self, _key: &K, now: u64) -> W::Stored {
        self.interval.units(now).store()
    }

    // Always inlined, so that a store builds the decision where its
    // caller wants it (BENCHMARKS.md, "Instructions per request").
    #[inline(always)]
    fn check(&self, tat: &mut W::Stored, cost: u64, now: u64) -> Decision {
        let t = self.interval.units(now);
        let used = self.used_units(W::load(*tat), t);
        if cost > self.burst {
            return self.decision(false, used, None);
        }
        // At most 2 * B * T: no overflow.
        let new = used + W::from_u64(cost) * self.interval.step;
        if new <= self.capacity {
            if cost > 0 {
                *tat = t.wrapping_add(new).store();
            }
            self.decision(true, new, Some(W::ZERO))
        } else {
            self.decision(false, used, Some(new - self.capacity))
        }
    }

    #[inline(always)]
    fn denies_read_only(&self) -> bool {
        true
    }

    /// A denial never writes the `TAT`: a check of a copy tells it.
    #[inline(always)]
    fn check_denied(&self, tat: &W::Stored, cost: u64, now: u64) -> Option<Decision> {
        let mut copy = *tat;
        let decision = self.check(&mut copy, cost, now);
        (!decision.allowed).then_some(decision)
    }

    /// Pushes the `TAT` by `cost * T` whatever is left: past `t + B*T`
    /// the key is in debt, and is denied until the `TAT` is back within
    /// the tolerance. A key owes at most its burst: the used time is
    /// capped at `2 * B*T` (and at `MAX_SPAN`, 2^61 scaled units, 2^125
    /// for the wide state, the most a state can be ahead and still be told
    /// from an old one), or at what it already used, if more.
    fn charge(&self, tat: &mut W::Stored, cost: u64, now: u64) -> Decision {
        let t = self.interval.units(now);
        let used = self.used_units(W::load(*tat), t);
        let cap = (self.capacity + self.capacity).min(W::MAX_SPAN).max(used);
        let new = W::from_u64(cost)
            .checked_mul(self.interval.step)
            .and_then(|add| used.checked_add(add))
            .map_or(cap, |n| n.min(cap));
        if cost > 0 {
            *tat = t.wrapping_add(new).store();
        }
        // A peek: denied, with the debt's wait, past the capacity.
        self.check(tat, 0, now)
    }

    fn refund(&self, tat: &mut W::Stored, cost: u64, _admitted_at: u64, now: u64) {
        let t = self.interval.units(now);
        let used = self.used_units(W::load(*tat), t);
        let back = W::from_u64(cost.min(self.burst)) * self.interval.step;
        let left = if used > back { used - back } else { W::ZERO };
        *tat = t.wrapping_add(left).store();
    }

    #[inline]
    fn is_full(&self, tat: &W::Stored, now: u64) -> bool {
        ahead(W::load(*tat), self.interval.units(now)) <= W::signed_zero()
    }

    fn idle_horizon(&self) -> u64 {
        self.interval.idle_horizon()
    }

    fn limit(&self) -> u64 {
        self.burst
    }

    fn window(&self) -> Duration {
        self.window
    }

    fn name(&self) -> &'static str {
        "gcra"
    }
}

#[cfg(feature = "live")]
impl Gcra<u128> {
    /// How far `tat` is ahead of `now` in scaled units, as [`check`]
    /// reads it (beyond the capacity for an overshoot), and `T` in the same units: the
    /// quota used, for carrying it over to other settings.
    ///
    /// [`check`]: Algorithm::check
    pub(crate) fn used(&self, tat: &[u64; 2], now: u64) -> (u128, u128) {
        let used = self.used_units(u128::load(*tat), self.interval.units(now));
        (used, self.interval.step)
    }

    /// The state at `now` with `used` scaled units of quota taken, beyond
    /// the capacity if so (the overshoot is kept; only past `MAX_SPAN`,
    /// 2^125 units, is it capped).
    pub(crate) fn with_used(&self, used: u128, now: u64) -> [u64; 2] {
        let t = self.interval.units(now);
        t.wrapping_add(used.min(u128::MAX_SPAN)).store()
    }

    /// `T` in scaled units.
    pub(crate) fn step(&self) -> u128 {
        self.interval.step
    }
}
