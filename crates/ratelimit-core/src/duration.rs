//! Parsing durations written as an integer and a unit (`500ms`, `5m`, `1d`).

use crate::ConfigError;
use std::time::Duration;

/// Parses `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d`.
///
/// Zero is accepted here (`"0s"`); constructors reject zero periods.
///
/// ```
/// use ratelimit_core::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
/// assert!(parse_duration("5 minutes").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::BadDuration(s.to_owned());
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let millis = n.checked_mul(millis_per_unit).ok_or_else(bad)?;
    Ok(Duration::from_millis(millis))
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
        }
    }
}
