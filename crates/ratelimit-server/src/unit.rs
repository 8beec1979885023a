//! An algorithm's rate in the RLS protocol's units (second, minute, hour,
//! day; week, month, year for calendar windows).

use ratelimit_core::algorithm::CalendarUnit;
use ratelimit_core::AnyAlgorithm;
use std::time::Duration;

/// The RLS units this server reports, with their length in seconds.
pub const UNITS: [(RlsUnit, u64); 4] = [
    (RlsUnit::Second, 1),
    (RlsUnit::Minute, 60),
    (RlsUnit::Hour, 3_600),
    (RlsUnit::Day, 86_400),
];

/// An RLS `RateLimit.Unit` this server reports (week, month and year only
/// for fixed windows of those calendar units).
///
/// ```
/// use ratelimit_core::AnyAlgorithm;
/// use ratelimit_server::unit::{rls_rate, RlsUnit, UNITS};
///
/// let per_second: AnyAlgorithm = "gcra 5/1s".parse().unwrap();
/// assert_eq!(rls_rate(&per_second), (5, RlsUnit::Second));
/// assert_eq!(UNITS[1], (RlsUnit::Minute, 60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RlsUnit {
    /// `SECOND`.
    Second,
    /// `MINUTE`.
    Minute,
    /// `HOUR`.
    Hour,
    /// `DAY`.
    Day,
    /// `WEEK`.
    Week,
    /// `MONTH`.
    Month,
    /// `YEAR`.
    Year,
}

/// `algorithm`'s rate as `requests_per_unit` and a unit: a fixed window of
/// a calendar unit (`fixed-window 1000/month`) is its limit per `WEEK`,
/// `MONTH` or `YEAR` exactly; every other algorithm's rate is
/// [`to_rls`] of its [`rate`](AnyAlgorithm::rate).
///
/// ```
/// use ratelimit_core::AnyAlgorithm;
/// use ratelimit_server::unit::{rls_rate, RlsUnit};
///
/// let monthly: AnyAlgorithm = "fixed-window 1000/month".parse().unwrap();
/// assert_eq!(rls_rate(&monthly), (1000, RlsUnit::Month));
/// let minute: AnyAlgorithm = "gcra 10/1m".parse().unwrap();
/// assert_eq!(rls_rate(&minute), (10, RlsUnit::Minute));
/// ```
pub fn rls_rate(algorithm: &AnyAlgorithm) -> (u32, RlsUnit) {
    if let AnyAlgorithm::FixedWindow(w) = algorithm {
        if let Some(unit) = w.calendar_unit() {
            let limit = u32::try_from(w.rate_limit()).unwrap_or(u32::MAX);
            let unit = match unit {
                CalendarUnit::Week => RlsUnit::Week,
                CalendarUnit::Month => RlsUnit::Month,
                CalendarUnit::Year => RlsUnit::Year,
            };
            return (limit, unit);
        }
    }
    let (limit, period) = algorithm.rate();
    to_rls(limit, period)
}

/// `limit` per `period` as `requests_per_unit` and a unit: exact when the
/// period is one second, minute, hour or day; otherwise the rate in the
/// longest unit not longer than the period (a second for shorter periods),
/// rounded down, or in the next longer unit when that rounds to 0.
///
/// ```
/// use ratelimit_server::unit::{to_rls, RlsUnit};
/// use std::time::Duration;
///
/// let s = Duration::from_secs;
/// assert_eq!(to_rls(10, s(60)), (10, RlsUnit::Minute));
/// assert_eq!(to_rls(10, s(300)), (2, RlsUnit::Minute));
/// assert_eq!(to_rls(1, s(300)), (12, RlsUnit::Hour));
/// assert_eq!(to_rls(10, Duration::from_millis(100)), (100, RlsUnit::Second));
/// ```
pub fn to_rls(limit: u64, period: Duration) -> (u32, RlsUnit) {
    let period_ns = period.as_nanos().max(1);
    let scaled = |unit_secs: u64| {
        let n = u128::from(limit) * u128::from(unit_secs) * 1_000_000_000 / period_ns;
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let at = UNITS
        .iter()
        .rposition(|(_, secs)| u128::from(*secs) * 1_000_000_000 <= period_ns)
        .unwrap_or(0);
    for (unit, secs) in &UNITS[at..] {
        let n = scaled(*secs);
        if n > 0 || limit == 0 {
            return (n, *unit);
        }
    }
    let (unit, secs) = UNITS[UNITS.len() - 1];
    (scaled(secs), unit)
}
