//! Property tests: each algorithm against the reference model, on random
//! settings and random traces, through the store and directly.

use crate::harness::{limit, period, run_both, trace};
use crate::model::Spec;
use proptest::prelude::*;
use ratelimit_core::{
    Anchor, ConfigError, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use std::time::Duration;

const LEN: usize = 60;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn shards() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), Just(2), Just(64)]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn gcra_matches_model(
        l in limit(),
        p in period(),
        burst_mode in 0u8..4,
        b_raw in 1u64..3_000,
        steps in trace(LEN),
        shards in shards(),
    ) {
        let b = match burst_mode {
            0 => l,
            1 => 1,
            _ => b_raw,
        };
        let gcra = Gcra::with_burst(l, Duration::from_nanos(p), b).unwrap();
        run_both(gcra, Spec::Gcra { limit: l, period: p, burst: b }, &steps, shards)?;
    }

    #[test]
    fn token_bucket_matches_model(
        capacity in prop_oneof![Just(1u64), Just(10), 1u64..50, 1u64..5_000],
        refill in limit(),
        p in period(),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let bucket = TokenBucket::new(capacity, refill, Duration::from_nanos(p)).unwrap();
        let spec = Spec::Gcra { limit: refill, period: p, burst: capacity };
        run_both(bucket, spec, &steps, shards)?;
    }

    #[test]
    fn leaky_bucket_matches_model(
        l in limit(),
        p in period(),
        q in prop_oneof![Just(0u64), Just(1), 0u64..10, 0u64..1_000],
        steps in trace(LEN),
        shards in shards(),
    ) {
        let bucket = LeakyBucket::new(l, Duration::from_nanos(p), q).unwrap();
        run_both(bucket, Spec::Leaky { limit: l, period: p, queue: q }, &steps, shards)?;
    }

    #[test]
    fn fixed_window_matches_model(
        l in limit(),
        p in period(),
        anchor in prop_oneof![
            Just(Anchor::Aligned),
            Just(Anchor::FirstRequest),
            Just(Anchor::KeyOffset),
        ],
        steps in trace(LEN),
        shards in shards(),
    ) {
        let window = FixedWindow::new(l, Duration::from_nanos(p)).unwrap().with_anchor(anchor);
        run_both(window, Spec::Fixed { limit: l, period: p, anchor }, &steps, shards)?;
    }

    #[test]
    fn sliding_log_matches_model(
        l in prop_oneof![Just(1u64), Just(3), 1u64..20, 1u64..10_000],
        p in period(),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let log = SlidingLog::new(l, Duration::from_nanos(p)).unwrap();
        run_both(log, Spec::Log { limit: l, period: p }, &steps, shards)?;
    }

    #[test]
    fn sliding_window_matches_model(
        l in limit(),
        p in period(),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let window = SlidingWindow::new(l, Duration::from_nanos(p)).unwrap();
        run_both(window, Spec::Window { limit: l, period: p }, &steps, shards)?;
    }

    /// Settings and costs at the edges of the integer types: the arithmetic
    /// must stay exact and never panic.
    #[test]
    fn huge_settings_match_model(
        which in 0u8..5,
        l in prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), Just(1u64 << 63), (1u64 << 62)..u64::MAX],
        p in prop_oneof![Just(u64::MAX), Just(1u64), (1u64 << 62)..u64::MAX, 1u64..1_000_000_000],
        steps in trace(20),
    ) {
        let d = Duration::from_nanos(p);
        match which {
            0 => {
                let a = FixedWindow::new(l, d).unwrap();
                let spec = Spec::Fixed { limit: l, period: p, anchor: Anchor::Aligned };
                run_both(a, spec, &steps, 1)?;
            }
            1 => {
                let a = FixedWindow::new(l, d).unwrap().with_anchor(Anchor::FirstRequest);
                let spec = Spec::Fixed { limit: l, period: p, anchor: Anchor::FirstRequest };
                run_both(a, spec, &steps, 1)?;
            }
            2 => {
                let a = SlidingWindow::new(l, d).unwrap();
                run_both(a, Spec::Window { limit: l, period: p }, &steps, 1)?;
            }
            3 => {
                let a = SlidingLog::with_max_entries(l, d, u64::MAX).unwrap();
                run_both(a, Spec::Log { limit: l, period: p }, &steps, 1)?;
            }
            _ => {
                // A tiny burst keeps B * T in range even when T is tiny.
                let p = p % 1_000_000_000 + 1;
                let g = gcd(l, p);
                match Gcra::with_burst(l, Duration::from_nanos(p), 3) {
                    Ok(a) => {
                        prop_assert!(l / g <= 1 << 61);
                        run_both(a, Spec::Gcra { limit: l, period: p, burst: 3 }, &steps, 1)?;
                    }
                    // More than 2^61 scaled units per nanosecond is refused.
                    Err(e) => {
                        prop_assert_eq!(e, ConfigError::Overflow("limit / period"));
                        prop_assert!(l / g > 1 << 61);
                    }
                }
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
