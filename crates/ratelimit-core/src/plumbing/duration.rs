//! Durations as text (`500ms`, `5m`, `1d`), and the two roundings every
//! crate uses: saturating nanoseconds and whole seconds rounded up.

use crate::ConfigError;
use std::time::Duration;

/// Parses `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d`.
///
/// Zero is accepted here (`"0s"`); constructors reject zero periods.
///
/// ```
/// use ratelimit_core::plumbing::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
/// assert!(parse_duration("5 minutes").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    // Every unit but `us` and `ns`.
    parse_with_units(s, &UNITS[..5])
}

/// Nanoseconds per unit, largest first.
const UNITS: [(&str, u128); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Like [`parse_duration`], with the units `us` and `ns` too: the
/// duration of an algorithm spec (see [`AnyAlgorithm`](crate::AnyAlgorithm)'s
/// `FromStr`).
pub(crate) fn parse_fine_duration(s: &str) -> Result<Duration, ConfigError> {
    parse_with_units(s, &UNITS)
}

fn parse_with_units(s: &str, units: &[(&str, u128)]) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::BadDuration(s.to_owned());
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u128 = digits.parse().map_err(|_| bad())?;
    let (_, per_unit) = units.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?;
    let nanos = n.checked_mul(*per_unit).ok_or_else(bad)?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// `d` in whole nanoseconds, `u64::MAX` for a duration longer than that
/// (584 years).
///
/// ```
/// use ratelimit_core::plumbing::saturating_nanos;
/// use std::time::Duration;
///
/// assert_eq!(saturating_nanos(Duration::from_millis(2)), 2_000_000);
/// assert_eq!(saturating_nanos(Duration::MAX), u64::MAX);
/// ```
#[inline]
pub fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` in whole seconds, rounded up: a positive wait is never 0 seconds
/// (`Retry-After`, the `RateLimit` fields).
///
/// ```
/// use ratelimit_core::plumbing::ceil_secs;
/// use std::time::Duration;
///
/// assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
/// assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
/// assert_eq!(ceil_secs(Duration::ZERO), 0);
/// ```
#[inline]
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Writes `d` as an integer in the largest unit of `d h m s ms us ns` that
/// holds it exactly (`90s` is `90s`, `120s` is `2m`, zero is `0s`).
///
/// ```
/// use ratelimit_core::plumbing::format_duration;
/// use std::time::Duration;
///
/// assert_eq!(format_duration(Duration::from_secs(86_400)), "1d");
/// assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
/// ```
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    let (unit, per_unit) = UNITS
        .iter()
        .find(|(_, n)| nanos % n == 0)
        .copied()
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "s",
            "1",
            "1x",
            "-1s",
            "1.5s",
            " 1s",
            "1s ",
            "1S",
            "99999999999999999999s",
            "18446744073709551615d",
        ] {
            assert!(parse_duration(s).is_err(), "{s}");
            assert!(parse_fine_duration(s).is_err(), "{s}");
        }
    }

    #[test]
    fn fine_units_and_formatting() {
        assert_eq!(parse_fine_duration("3ns").unwrap(), Duration::from_nanos(3));
        assert_eq!(
            parse_fine_duration("7us").unwrap(),
            Duration::from_micros(7)
        );
        assert!(parse_duration("7us").is_err());
        for (d, s) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1_001), "1001ns"),
            (Duration::from_micros(1_500), "1500us"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(7_200), "2h"),
            (Duration::from_secs(86_400 * 7), "7d"),
            (Duration::MAX, "18446744073709551615999999999ns"),
        ] {
            assert_eq!(format_duration(d), s);
            assert_eq!(parse_fine_duration(s).unwrap(), d, "{s}");
        }
    }
}
