//! Settings are validated at construction with a typed error, never a
//! panic.

use ratelimit_core::{
    ConfigError, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
    DEFAULT_MAX_LOG_ENTRIES,
};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

/// Longer than `u64::MAX` nanoseconds.
fn too_long() -> Duration {
    Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)
}

#[test]
fn zero_limits() {
    let zero = |what| ConfigError::ZeroLimit(what);
    assert_eq!(Gcra::new(0, SEC).unwrap_err(), zero("limit"));
    assert_eq!(Gcra::with_burst(0, SEC, 1).unwrap_err(), zero("limit"));
    assert_eq!(TokenBucket::new(0, 1, SEC).unwrap_err(), zero("capacity"));
    assert_eq!(TokenBucket::new(1, 0, SEC).unwrap_err(), zero("refill"));
    assert_eq!(LeakyBucket::new(0, SEC, 1).unwrap_err(), zero("limit"));
    assert_eq!(FixedWindow::new(0, SEC).unwrap_err(), zero("limit"));
    assert_eq!(SlidingLog::new(0, SEC).unwrap_err(), zero("limit"));
    assert_eq!(SlidingWindow::new(0, SEC).unwrap_err(), zero("limit"));
}

#[test]
fn zero_burst() {
    assert_eq!(
        Gcra::with_burst(5, SEC, 0).unwrap_err(),
        ConfigError::ZeroBurst
    );
}

#[test]
fn zero_periods() {
    let z = Duration::ZERO;
    assert_eq!(Gcra::new(1, z).unwrap_err(), ConfigError::ZeroPeriod);
    assert_eq!(
        TokenBucket::new(1, 1, z).unwrap_err(),
        ConfigError::ZeroPeriod
    );
    assert_eq!(
        LeakyBucket::new(1, z, 0).unwrap_err(),
        ConfigError::ZeroPeriod
    );
    assert_eq!(FixedWindow::new(1, z).unwrap_err(), ConfigError::ZeroPeriod);
    assert_eq!(SlidingLog::new(1, z).unwrap_err(), ConfigError::ZeroPeriod);
    assert_eq!(
        SlidingWindow::new(1, z).unwrap_err(),
        ConfigError::ZeroPeriod
    );
}

#[test]
fn periods_over_u64_nanoseconds() {
    let p = too_long();
    let long = ConfigError::PeriodTooLong(p);
    assert_eq!(Gcra::new(1, p).unwrap_err(), long);
    assert_eq!(TokenBucket::new(1, 1, p).unwrap_err(), long);
    assert_eq!(LeakyBucket::new(1, p, 0).unwrap_err(), long);
    assert_eq!(FixedWindow::new(1, p).unwrap_err(), long);
    assert_eq!(SlidingLog::new(1, p).unwrap_err(), long);
    assert_eq!(SlidingWindow::new(1, p).unwrap_err(), long);
    assert_eq!(
        Gcra::new(1, Duration::MAX).unwrap_err(),
        ConfigError::PeriodTooLong(Duration::MAX)
    );
    // The longest period that fits is fine where the arithmetic allows it.
    let max = Duration::from_nanos(u64::MAX);
    assert!(FixedWindow::new(u64::MAX, max).is_ok());
    assert!(SlidingWindow::new(u64::MAX, max).is_ok());
    assert!(SlidingLog::new(1, max).is_ok());
}

#[test]
fn overflowing_burst_times_t() {
    // B * T must stay within 2^61 scaled units.
    let overflow = |r: Result<Gcra, ConfigError>| {
        assert!(matches!(r.unwrap_err(), ConfigError::Overflow(_)));
    };
    overflow(Gcra::new(u64::MAX, SEC));
    overflow(Gcra::with_burst(1, Duration::from_nanos(u64::MAX), 2));
    overflow(Gcra::with_burst(
        1,
        Duration::from_secs(86_400 * 365),
        u64::MAX,
    ));
    // 2^61 ns is the longest B*T when T is whole.
    assert!(Gcra::with_burst(1, Duration::from_nanos(1 << 61), 1).is_ok());
    overflow(Gcra::with_burst(1, Duration::from_nanos((1 << 61) + 1), 1));
    overflow(Gcra::with_burst(2, Duration::from_nanos(1 << 61), 3));
    assert!(matches!(
        TokenBucket::new(u64::MAX, 1, SEC).unwrap_err(),
        ConfigError::Overflow(_)
    ));
    assert!(matches!(
        LeakyBucket::new(1, SEC, u64::MAX).unwrap_err(),
        ConfigError::Overflow(_)
    ));
    assert!(matches!(
        LeakyBucket::new(1, Duration::from_nanos(1 << 60), 1).unwrap_err(),
        ConfigError::Overflow(_)
    ));
    // More than 2^61 scaled units per nanosecond (here 2^63 - 1 per second,
    // burst 1): a state a few nanoseconds old would wrap.
    overflow(Gcra::with_burst(i64::MAX as u64, SEC, 1));
    assert!(matches!(
        LeakyBucket::new(i64::MAX as u64, SEC, 0).unwrap_err(),
        ConfigError::Overflow(_)
    ));
}

#[test]
fn sliding_log_over_its_bound() {
    assert!(SlidingLog::new(DEFAULT_MAX_LOG_ENTRIES, SEC).is_ok());
    assert_eq!(
        SlidingLog::new(DEFAULT_MAX_LOG_ENTRIES + 1, SEC).unwrap_err(),
        ConfigError::LogTooLong {
            limit: DEFAULT_MAX_LOG_ENTRIES + 1,
            max: DEFAULT_MAX_LOG_ENTRIES
        }
    );
    assert_eq!(
        SlidingLog::with_max_entries(11, SEC, 10).unwrap_err(),
        ConfigError::LogTooLong { limit: 11, max: 10 }
    );
    assert!(SlidingLog::with_max_entries(10, SEC, 10).is_ok());
}

#[test]
fn errors_are_one_line_messages() {
    let errors = [
        Gcra::new(0, SEC).unwrap_err(),
        Gcra::with_burst(1, SEC, 0).unwrap_err(),
        Gcra::new(1, Duration::ZERO).unwrap_err(),
        Gcra::new(1, too_long()).unwrap_err(),
        Gcra::new(u64::MAX, SEC).unwrap_err(),
        SlidingLog::new(u64::MAX, SEC).unwrap_err(),
        ratelimit_core::parse_duration("1.5s").unwrap_err(),
    ];
    for e in errors {
        let msg = e.to_string();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
    }
}
