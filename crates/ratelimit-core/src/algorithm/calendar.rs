//! Calendar units (week, month, year) on the UTC calendar: where the unit
//! holding an instant (nanoseconds since the Unix epoch) starts and ends.

use std::fmt;
use std::time::Duration;

/// Nanoseconds in a UTC day (Unix time has no leap seconds).
const DAY: u64 = 86_400_000_000_000;

/// A unit of the UTC calendar whose windows a
/// [`FixedWindow`](crate::FixedWindow) can follow (written `week`, `month`
/// or `year` in a spec: `fixed-window 1000/month`).
///
/// A week starts on Monday 00:00 UTC (ISO 8601), a month on the first of
/// the month, a year on January 1st. Instants are nanoseconds since the
/// Unix epoch, as a [`SystemClock`](crate::SystemClock) counts them.
///
/// ```
/// use ratelimit_core::algorithm::CalendarUnit;
///
/// const DAY: u64 = 86_400_000_000_000;
/// // 1970-02-10: its month runs from February 1st (day 31) for 28 days.
/// let (start, len) = CalendarUnit::Month.window(40 * DAY);
/// assert_eq!((start, len), (31 * DAY, 28 * DAY));
/// assert_eq!(CalendarUnit::Month.to_string(), "month");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    /// Monday 00:00 UTC to the next Monday: always 7 days.
    Week,
    /// The first of a month 00:00 UTC to the first of the next: 28 to 31 days.
    Month,
    /// January 1st 00:00 UTC to the next: 365 or 366 days.
    Year,
}

impl CalendarUnit {
    /// The three units, shortest first.
    pub const ALL: [CalendarUnit; 3] = [Self::Week, Self::Month, Self::Year];

    /// Its name in a spec: `week`, `month` or `year`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }

    /// The unit named `name` (exactly `week`, `month` or `year`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.name() == name)
    }

    /// Its longest length: 7, 31 or 366 days.
    pub fn longest(self) -> Duration {
        let days = match self {
            Self::Week => 7,
            Self::Month => 31,
            Self::Year => 366,
        };
        Duration::from_secs(days * 86_400)
    }

    /// The unit holding `t`: its start and its length, in nanoseconds.
    ///
    /// The start is taken modulo 2^64: the week holding the epoch (a
    /// Thursday) started on Monday 1969-12-29, before time 0. Months and
    /// years never start before time 0. The end, `start + length`, may
    /// pass `u64::MAX` for the last unit a `u64` reaches (in 2554).
    pub fn window(self, t: u64) -> (u64, u64) {
        let days = (t / DAY) as i64;
        let (first, next) = match self {
            // 1970-01-01 was a Thursday: Monday is 3 days before it.
            Self::Week => {
                let monday = days - (days + 3).rem_euclid(7);
                (monday, monday + 7)
            }
            Self::Month => {
                let (y, m, _) = civil_from_days(days);
                let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (days_from_civil(y, m, 1), days_from_civil(next.0, next.1, 1))
            }
            Self::Year => {
                let (y, _, _) = civil_from_days(days);
                (days_from_civil(y, 1, 1), days_from_civil(y + 1, 1, 1))
            }
        };
        let start = (first as u64).wrapping_mul(DAY);
        (start, (next - first) as u64 * DAY)
    }
}

impl fmt::Display for CalendarUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The date (year, month 1..=12, day 1..=31) `days` days after 1970-01-01,
/// in the proleptic Gregorian calendar (H. Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1st
    let mp = (5 * doy + 2) / 153; // [0, 11], March is 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The days from 1970-01-01 to the date (the inverse of
/// [`civil_from_days`]).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400); // [0, 399]
    let mp = i64::from((month + 9) % 12); // March is 0
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(2554, 7, 21), 213_503);
        for d in -800_000..800_000 {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
