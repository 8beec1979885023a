//! Property tests: each algorithm against the reference model, on random
//! settings and random traces, through the store and directly; and GCRA and
//! the buckets on settings too wide for their 8-byte state, in the 16-byte
//! one.

use crate::harness::{limit, period, run, run_both, trace, Step};
use crate::model::{self, Spec};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ratelimit_core::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, AnyTokenBucket};
use ratelimit_core::{
    Algorithm, AnyAlgorithm, ConfigError, FixedWindow, Gcra, LeakyBucket, SlidingLog,
    SlidingWindow, TokenBucket,
};
use ratelimit_test_support::model::Anchor as ModelAnchor;
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

    /// A read-only denial is what a check of a copy of the state returns,
    /// and a check it does not answer is admitted: GCRA in both widths,
    /// the token bucket, and both through `AnyAlgorithm`.
    #[test]
    fn check_denied_is_a_check_of_a_copy(
        l in limit(),
        p in period(),
        b in 1u64..50,
        steps in prop::collection::vec((0u64..3_000_000_000, 0u64..60), 1..LEN),
    ) {
        let period = Duration::from_nanos(p);
        let gcra = Gcra::with_burst(l, period, b).unwrap();
        denials_read_alike(&gcra, &steps)?;
        denials_read_alike(&Gcra::with_burst_wide(l, period, b).unwrap(), &steps)?;
        denials_read_alike(&AnyAlgorithm::Gcra(AnyGcra::Narrow(gcra)), &steps)?;
        let bucket = TokenBucket::new(b, l, period).unwrap();
        denials_read_alike(&bucket, &steps)?;
        let any = AnyAlgorithm::TokenBucket(AnyTokenBucket::new(b, l, period).unwrap());
        denials_read_alike(&any, &steps)?;
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
        let window = FixedWindow::new(l, Duration::from_nanos(p)).unwrap().with_anchor(anchor).unwrap();
        run_both(window, Spec::Fixed { limit: l, period: p, anchor: model::anchor(anchor) }, &steps, shards)?;
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
                let spec = Spec::Fixed { limit: l, period: p, anchor: ModelAnchor::Aligned };
                run_both(a, spec, &steps, 1)?;
            }
            1 => {
                let a = FixedWindow::new(l, d).unwrap().with_anchor(Anchor::FirstRequest).unwrap();
                let spec = Spec::Fixed { limit: l, period: p, anchor: ModelAnchor::FirstRequest };
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
                let spec = Spec::Gcra { limit: l, period: p, burst: 3 };
                match Gcra::with_burst(l, Duration::from_nanos(p), 3) {
                    Ok(a) => {
                        prop_assert!(l / g <= 1 << 61);
                        run_both(a, spec, &steps, 1)?;
                    }
                    // More than 2^61 scaled units per nanosecond is refused
                    // by the 8-byte state, and held by the 16-byte one.
                    Err(e) => {
                        prop_assert_eq!(
                            e,
                            ConfigError::Overflow(
                                "limit / period for the 8-byte state of Gcra (use Gcra<u128>)"
                            )
                        );
                        prop_assert!(l / g > 1 << 61);
                        let a = Gcra::with_burst_wide(l, Duration::from_nanos(p), 3).unwrap();
                        run_both(a, spec, &steps, 1)?;
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------
// Settings too wide for the 8-byte state: `B * T` (the leaky bucket's
// `(Q + 2) * T`) over 2^61 units of `1 / (L / gcd(L, P))` ns, or more than
// 2^61 units per nanosecond. The wide types and the `Any*` forms (which pick
// the wide state for them) must decide them exactly like the model.

const DAY: u64 = 86_400_000_000_000;

/// `B * T` in scaled units.
/// Runs `steps` (time forward, cost) through `algorithm`, comparing each
/// check with what `check_denied` reads.
fn denials_read_alike<A>(algorithm: &A, steps: &[(u64, u64)]) -> Result<(), TestCaseError>
where
    A: Algorithm,
    A::State: Clone + PartialEq + std::fmt::Debug,
{
    prop_assert!(algorithm.denies_read_only());
    let mut state = algorithm.fresh(&(), 0);
    let mut now = 0u64;
    for &(dt, cost) in steps {
        now += dt;
        let mut copy = state.clone();
        let checked = algorithm.check(&mut copy, cost, now);
        let read = algorithm.check_denied(&state, cost, now);
        if checked.allowed {
            prop_assert_eq!(read, None);
        } else {
            prop_assert_eq!(read, Some(checked));
            prop_assert_eq!(&copy, &state);
        }
        algorithm.check(&mut state, cost, now);
    }
    Ok(())
}

fn span(limit: u64, period: u64, count: u64) -> u128 {
    u128::from(count) * u128::from(period / gcd(limit, period))
}

/// Whether the 8-byte state holds `count * T` (and the rate).
fn narrow_holds(limit: u64, period: u64, count: u64) -> bool {
    span(limit, period, count) <= 1 << 61 && limit / gcd(limit, period) <= 1 << 61
}

/// Limits, periods and bursts the 8-byte state cannot hold (and a few
/// around its edge): `(limit, period_ns, burst)`.
fn wide_setting() -> impl Strategy<Value = (u64, u64, u64)> {
    prop_oneof![
        // The motivating cases: 30001 per day, and 7 per day with a
        // burst of a million.
        Just((30_001u64, DAY, 30_001u64)),
        (1u64..5).prop_map(|b| (30_001, DAY, b)),
        Just((7, DAY, 1_000_000)),
        (1_000_000u64..100_000_000).prop_map(|b| (7, DAY, b)),
        // A large prime per second with large bursts.
        (1u64 << 31..u64::MAX).prop_map(|b| (999_999_937, 1_000_000_000, b)),
        Just((999_999_937, 1_000_000_000, u64::MAX)),
        // Bursts around the edge of the 8-byte state: B * T within a few
        // units of 2^61 either way.
        (1u64..1_000_000, 1u64..100 * DAY, 0u64..8).prop_map(|(l, p, d)| {
            let step = p / gcd(l, p);
            (l, p, ((1u64 << 61) / step + d).saturating_sub(3).max(1))
        }),
        // Random wide ones: a long period, a large burst.
        (1u64..100_000, DAY..400 * DAY, 1u64 << 20..1u64 << 40),
        // More than 2^61 requests per nanosecond (reduced).
        ((1u64 << 61) + 1..u64::MAX, 1u64..4, 1u64..1_000),
    ]
}

fn wide_config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(wide_config())]

    #[test]
    fn wide_gcra_matches_model(
        (l, p, b) in wide_setting(),
        default_burst in prop::bool::weighted(0.2),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let b = if default_burst { l } else { b };
        let d = Duration::from_nanos(p);
        let spec = Spec::Gcra { limit: l, period: p, burst: b };
        let Ok(any) = AnyGcra::with_burst(l, d, b) else {
            // Only a window longer than a `Duration` is refused here.
            prop_assert!(u128::from(b) * u128::from(p) / u128::from(l) > Duration::MAX.as_nanos());
            return Ok(());
        };
        prop_assert_eq!(any.is_wide(), !narrow_holds(l, p, b));
        match Gcra::with_burst(l, d, b) {
            Ok(narrow) => {
                prop_assert_eq!(any, AnyGcra::Narrow(narrow));
                run_both(narrow, spec, &steps, shards)?;
            }
            Err(e) => {
                prop_assert!(matches!(e, ConfigError::Overflow(m) if m.contains("Gcra<u128>")));
            }
        }
        // The wide state decides every setting, the narrow ones too.
        let wide = Gcra::with_burst_wide(l, d, b).unwrap();
        run_both(wide, spec, &steps, shards)?;
        run(AnyAlgorithm::from(any), spec, &steps, shards)?;
    }

    #[test]
    fn wide_token_bucket_matches_model(
        (refill, p, capacity) in wide_setting(),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let d = Duration::from_nanos(p);
        let spec = Spec::Gcra { limit: refill, period: p, burst: capacity };
        let Ok(any) = AnyTokenBucket::new(capacity, refill, d) else {
            prop_assert!(
                u128::from(capacity) * u128::from(p) / u128::from(refill)
                    > Duration::MAX.as_nanos()
            );
            return Ok(());
        };
        prop_assert_eq!(any.is_wide(), !narrow_holds(refill, p, capacity));
        prop_assert_eq!((any.capacity(), any.refill(), any.period()), (capacity, refill, d));
        if let Some(narrow) = any.narrow() {
            run_both(narrow, spec, &steps, shards)?;
        } else {
            let e = TokenBucket::new(capacity, refill, d).unwrap_err();
            prop_assert!(matches!(e, ConfigError::Overflow(m) if m.contains("TokenBucket<u128>")));
        }
        let wide = TokenBucket::new_wide(capacity, refill, d).unwrap();
        prop_assert_eq!(any.wide().is_some(), any.is_wide());
        run_both(wide, spec, &steps, shards)?;
        run(AnyAlgorithm::from(any), spec, &steps, shards)?;
    }

    #[test]
    fn wide_leaky_bucket_matches_model(
        (l, p, b) in wide_setting(),
        steps in trace(LEN),
        shards in shards(),
    ) {
        let q = b - 1;
        let d = Duration::from_nanos(p);
        let spec = Spec::Leaky { limit: l, period: p, queue: q };
        let Ok(any) = AnyLeakyBucket::new(l, d, q) else {
            prop_assert!(
                u128::from(b) * u128::from(p) / u128::from(l) > Duration::MAX.as_nanos()
            );
            return Ok(());
        };
        prop_assert_eq!(any.is_wide(), !narrow_holds(l, p, q.saturating_add(2)));
        match any {
            AnyLeakyBucket::Narrow(narrow) => run_both(narrow, spec, &steps, shards)?,
            AnyLeakyBucket::Wide(_) => {
                let e = LeakyBucket::new(l, d, q).unwrap_err();
                prop_assert!(
                    matches!(e, ConfigError::Overflow(m) if m.contains("LeakyBucket<u128>"))
                );
            }
        }
        let wide = LeakyBucket::new_wide(l, d, q).unwrap();
        run_both(wide, spec, &steps, shards)?;
        run(AnyAlgorithm::from(any), spec, &steps, shards)?;
    }

    /// Near the edge of the 16-byte state: `B * T` around 2^125 units.
    /// Periods of 146 to 584 years and limits of 2^32 to 2^60 keep the
    /// window a `Duration` (and the model's `t * L + B * P` in `u128`).
    #[test]
    fn the_edge_of_the_wide_state(
        l in (1u64 << 32)..(1u64 << 60),
        p in (1u64 << 62)..u64::MAX,
        delta in 0u64..8,
        leaky in any::<bool>(),
        steps in trace(30),
    ) {
        // The model counts in units of 1 / L ns (not 1 / (L / gcd(L, P))):
        // keep them the same, so that its i128 arithmetic stays in range.
        if gcd(l, p) != 1 {
            return Ok(());
        }
        let step = p;
        let edge = u64::try_from((1u128 << 125) / u128::from(step)).unwrap();
        let count = edge.saturating_add(delta).saturating_sub(3).max(2);
        let fits = span(l, p, count) <= 1 << 125;
        let d = Duration::from_nanos(p);
        if leaky {
            // (Q + 2) * T is what must fit.
            let q = count - 2;
            let spec = Spec::Leaky { limit: l, period: p, queue: q };
            match LeakyBucket::new_wide(l, d, q) {
                Ok(a) => {
                    prop_assert!(fits);
                    run_both(a, spec, &steps, 1)?;
                }
                Err(e) => {
                    prop_assert!(!fits);
                    prop_assert_eq!(e, ConfigError::Overflow("queue * period / limit"));
                }
            }
        } else {
            let spec = Spec::Gcra { limit: l, period: p, burst: count };
            match Gcra::with_burst_wide(l, d, count) {
                Ok(a) => {
                    prop_assert!(fits);
                    run_both(a, spec, &steps, 1)?;
                }
                Err(e) => {
                    prop_assert!(!fits);
                    prop_assert_eq!(e, ConfigError::Overflow("burst * period / limit"));
                }
            }
        }
    }

    /// Where both widths hold a setting, they decide alike, through every
    /// random trace (the model checks each; this checks the pair directly,
    /// every field of every decision).
    #[test]
    fn both_widths_decide_alike(
        l in limit(),
        p in period(),
        b in 1u64..3_000,
        leaky in any::<bool>(),
        steps in trace(LEN),
    ) {
        let d = Duration::from_nanos(p);
        if leaky {
            let (n, w) = (LeakyBucket::new(l, d, b - 1).unwrap(), LeakyBucket::new_wide(l, d, b - 1).unwrap());
            alike(n, w, &steps)?;
        } else {
            let (n, w) = (Gcra::with_burst(l, d, b).unwrap(), Gcra::with_burst_wide(l, d, b).unwrap());
            alike(n, w, &steps)?;
        }
    }
}

/// Replays `steps` (cost and a time step from each) through `narrow` and
/// `wide`, one key each, comparing whole decisions, refunds included.
fn alike<N: Algorithm, W: Algorithm>(
    narrow: N,
    wide: W,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(narrow.window(), wide.window());
    prop_assert_eq!(narrow.limit(), wide.limit());
    prop_assert_eq!(narrow.name(), wide.name());
    let (mut n, mut w) = (narrow.fresh(&0, 0), wide.fresh(&0, 0));
    let mut t = 0u64;
    let mut admitted = Vec::new();
    for step in steps {
        t = t.saturating_add(step.time_raw % (1 + narrow.window().as_nanos() as u64 / 4));
        let cost = step.cost_raw % (narrow.limit() + 2);
        if step.cost_mode == 0 {
            if let Some(at) = admitted.pop() {
                narrow.refund(&mut n, cost, at, t);
                wide.refund(&mut w, cost, at, t);
            }
        }
        let (a, b) = (narrow.check(&mut n, cost, t), wide.check(&mut w, cost, t));
        prop_assert_eq!(a, b, "t={} cost={}", t, cost);
        prop_assert_eq!(narrow.is_full(&n, t), wide.is_full(&w, t));
        if a.allowed {
            admitted.push(t);
        }
    }
    Ok(())
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
