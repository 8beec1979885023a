//! Settings are validated at construction with a typed error, never a
//! panic.

use ratelimit_core::algorithm::{AnyGcra, AnyLeakyBucket, AnyTokenBucket, DEFAULT_MAX_LOG_ENTRIES};
use ratelimit_core::{
    Algorithm, AnyAlgorithm, ConfigError, FixedWindow, Gcra, LeakyBucket, SlidingLog,
    SlidingWindow, TokenBucket,
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

const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn narrow_refusals_name_the_wide_type() {
    let msg = |e: ConfigError| e.to_string();
    let gcra = msg(Gcra::new(30_001, DAY).unwrap_err());
    assert!(
        gcra.contains("Gcra<u128>") && gcra.contains("burst"),
        "{gcra}"
    );
    let rate = msg(Gcra::with_burst(i64::MAX as u64, SEC, 1).unwrap_err());
    assert!(
        rate.contains("Gcra<u128>") && rate.contains("limit / period"),
        "{rate}"
    );
    let bucket = msg(TokenBucket::new(1_000_000, 7, DAY).unwrap_err());
    assert!(
        bucket.contains("TokenBucket<u128>") && bucket.contains("capacity"),
        "{bucket}"
    );
    let leaky = msg(LeakyBucket::new(7, DAY, 1_000_000).unwrap_err());
    assert!(
        leaky.contains("LeakyBucket<u128>") && leaky.contains("queue"),
        "{leaky}"
    );
    for e in [gcra, rate, bucket, leaky] {
        assert!(!e.contains('\n'));
    }
}

#[test]
fn the_wide_state_holds_what_the_narrow_one_refuses() {
    // The narrow edge: B * T = 2^61 units fits, one more unit does not.
    assert!(Gcra::with_burst(1, Duration::from_nanos(1 << 61), 1).is_ok());
    let over = Duration::from_nanos((1 << 61) + 1);
    assert!(Gcra::with_burst(1, over, 1).is_err());
    assert!(Gcra::with_burst_wide(1, over, 1).is_ok());
    assert!(AnyGcra::with_burst(1, over, 1).unwrap().is_wide());
    assert!(!AnyGcra::with_burst(1, Duration::from_nanos(1 << 61), 1)
        .unwrap()
        .is_wide());
    // Realistic settings.
    assert!(Gcra::new_wide(30_001, DAY).is_ok());
    assert!(TokenBucket::new_wide(1_000_000, 7, DAY).is_ok());
    assert!(LeakyBucket::new_wide(7, DAY, 1_000_000).is_ok());
    // And the extremes of u64 settings.
    assert!(Gcra::new_wide(u64::MAX, SEC).is_ok());
    assert!(Gcra::with_burst_wide(u64::MAX, Duration::from_nanos(1), u64::MAX).is_ok());
    assert!(Gcra::with_burst_wide(i64::MAX as u64, SEC, 1).is_ok());
    assert!(TokenBucket::new_wide(u64::MAX, 1, SEC).is_ok());
    assert!(LeakyBucket::new_wide(1, SEC, u64::MAX - 1).is_ok());
    // The wide state is 16 bytes aligned to 8.
    let wide = Gcra::new_wide(30_001, DAY).unwrap();
    assert_eq!(std::mem::size_of_val(&wide.fresh(&(), 0)), 16);
    assert_eq!(std::mem::align_of_val(&wide.fresh(&(), 0)), 8);
    // Every valid setting of the narrow state is one of the wide state.
    assert_eq!(
        Gcra::with_burst_wide(3, SEC, 2).unwrap().window(),
        Gcra::with_burst(3, SEC, 2).unwrap().window()
    );
}

#[test]
fn wide_refusals() {
    let overflow = |r: Result<Gcra<u128>, ConfigError>| {
        assert_eq!(
            r.unwrap_err(),
            ConfigError::Overflow("burst * period / limit")
        );
    };
    // B * T over 2^125 units: a 584-year period, a burst of 2^62.
    let long = Duration::from_nanos(u64::MAX);
    assert!(Gcra::with_burst_wide(u64::MAX - 1, long, 1 << 61).is_ok());
    overflow(Gcra::with_burst_wide(u64::MAX - 1, long, 1 << 62));
    // A window (so a wait) longer than a `Duration`: 2^64 - 1 seconds fits,
    // 2^64 - 1 periods of 1.001s do not.
    let g = Gcra::with_burst_wide(1, SEC, u64::MAX).unwrap();
    assert_eq!(g.window(), Duration::from_secs(u64::MAX));
    overflow(Gcra::with_burst_wide(
        1,
        Duration::from_millis(1_001),
        u64::MAX,
    ));
    overflow(Gcra::with_burst_wide(1, DAY, u64::MAX));
    assert_eq!(
        TokenBucket::new_wide(u64::MAX, 1, DAY).unwrap_err(),
        ConfigError::Overflow("capacity * period / refill")
    );
    // A queue of u64::MAX would report a limit of 2^64.
    assert_eq!(
        LeakyBucket::new_wide(1, SEC, u64::MAX).unwrap_err(),
        ConfigError::Overflow("queue")
    );
    assert_eq!(
        LeakyBucket::new_wide(1, DAY, u64::MAX - 1).unwrap_err(),
        ConfigError::Overflow("queue * period / limit")
    );
    // The other errors are the same in both widths.
    assert_eq!(
        Gcra::new_wide(0, SEC).unwrap_err(),
        ConfigError::ZeroLimit("limit")
    );
    assert_eq!(
        Gcra::with_burst_wide(1, SEC, 0).unwrap_err(),
        ConfigError::ZeroBurst
    );
    assert_eq!(
        Gcra::new_wide(1, Duration::ZERO).unwrap_err(),
        ConfigError::ZeroPeriod
    );
    let p = too_long();
    assert_eq!(
        Gcra::new_wide(1, p).unwrap_err(),
        ConfigError::PeriodTooLong(p)
    );
    assert_eq!(
        TokenBucket::new_wide(1, 0, SEC).unwrap_err(),
        ConfigError::ZeroLimit("refill")
    );
    assert_eq!(
        LeakyBucket::new_wide(0, SEC, 1).unwrap_err(),
        ConfigError::ZeroLimit("limit")
    );
}

#[test]
fn any_forms_fall_back_only_on_overflow() {
    // Errors that are not about the state's width come back as they are.
    assert_eq!(
        AnyGcra::new(0, SEC).unwrap_err(),
        ConfigError::ZeroLimit("limit")
    );
    assert_eq!(
        AnyGcra::with_burst(1, SEC, 0).unwrap_err(),
        ConfigError::ZeroBurst
    );
    assert_eq!(
        AnyTokenBucket::new(0, 1, SEC).unwrap_err(),
        ConfigError::ZeroLimit("capacity")
    );
    assert_eq!(
        AnyLeakyBucket::new(1, Duration::ZERO, 1).unwrap_err(),
        ConfigError::ZeroPeriod
    );
    // A setting neither width holds reports the wide refusal.
    assert_eq!(
        AnyGcra::with_burst(1, DAY, u64::MAX).unwrap_err(),
        ConfigError::Overflow("burst * period / limit")
    );
    assert_eq!(
        AnyLeakyBucket::new(1, SEC, u64::MAX).unwrap_err(),
        ConfigError::Overflow("queue")
    );
    // The narrow state whenever it holds the setting.
    let narrow = AnyTokenBucket::new(500, 100, SEC).unwrap();
    assert!(!narrow.is_wide() && narrow.wide().is_none());
    assert_eq!(
        narrow.narrow(),
        Some(TokenBucket::new(500, 100, SEC).unwrap())
    );
    let wide = AnyTokenBucket::new(1_000_000, 7, DAY).unwrap();
    assert_eq!(
        wide.wide(),
        Some(TokenBucket::new_wide(1_000_000, 7, DAY).unwrap())
    );
    assert_eq!(
        *wide.as_gcra(),
        AnyGcra::with_burst(7, DAY, 1_000_000).unwrap()
    );
    // Through `AnyAlgorithm`, with the right names.
    let any: AnyAlgorithm = wide.into();
    assert_eq!((any.name(), any.limit()), ("token-bucket", 1_000_000));
    let any: AnyAlgorithm = AnyLeakyBucket::new(7, DAY, 1_000_000).unwrap().into();
    assert_eq!((any.name(), any.limit()), ("leaky-bucket", 1_000_001));
    let any: AnyAlgorithm = Gcra::new_wide(30_001, DAY).unwrap().into();
    assert_eq!((any.name(), any.limit()), ("gcra", 30_001));
    assert_eq!(any.window(), DAY);
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
        ratelimit_core::plumbing::parse_duration("1.5s").unwrap_err(),
    ];
    for e in errors {
        let msg = e.to_string();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
    }
}
