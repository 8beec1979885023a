//! The idle-horizon sweep: GCRA and the leaky bucket keep their scaled time
//! modulo 2^64 (or 2^128 in the wide state), so a state left idle long
//! enough would wrap around and look recent. The store must drop such states in time (see
//! `Algorithm::idle_horizon` and `MemoryStore`), whatever the idle gaps,
//! sweeps and other keys' traffic.

use crate::harness::agree;
use crate::model::Spec;
use proptest::prelude::*;
use ratelimit_core::algorithm::{AnyGcra, AnyLeakyBucket};
use ratelimit_core::store::Upkeep;
use ratelimit_core::{Algorithm, AnyAlgorithm, Gcra, LeakyBucket, MemoryStore, Store};
use std::time::Duration;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Nanoseconds per 2^64 scaled units, rounded up.
fn wrap_ns(limit: u64, period: u64) -> u64 {
    let scale = limit / gcd(limit, period);
    u64::try_from((1u128 << 64).div_ceil(u128::from(scale))).unwrap()
}

/// The gap before the next request: nothing, a little, either side of half
/// the horizon and of the horizon, or within a nanosecond of a whole number
/// of wraps of the scaled time.
fn gap(mode: u8, raw: u64, horizon: u64, wrap: u64) -> u64 {
    let k = 1 + raw % 4;
    match mode {
        0 => 0,
        1 => raw % 1_000_000_000,
        2 => horizon / 2 - 1 + raw % 3,
        3 => horizon - 1 + raw % 3,
        4 => (k.saturating_mul(wrap) - 1).saturating_add(raw % 3),
        5 => k.saturating_mul(horizon).saturating_add(raw % horizon),
        _ => raw % horizon.saturating_mul(3),
    }
}

fn replay<A: Algorithm>(
    algorithm: A,
    spec: Spec,
    steps: &[(u8, u64, u8, u8, bool)],
    shards: usize,
) -> Result<(), TestCaseError> {
    let wrap = wrap_ns(spec.limit(), spec.period());
    replay_with(algorithm, spec, steps, shards, wrap)
}

/// [`replay`], with `wrap` the idle time, in ns, at which a stale state
/// would be misread.
fn replay_with<A: Algorithm>(
    algorithm: A,
    spec: Spec,
    steps: &[(u8, u64, u8, u8, bool)],
    shards: usize,
    wrap: u64,
) -> Result<(), TestCaseError> {
    let horizon = algorithm.idle_horizon();
    prop_assert!(horizon < wrap && horizon >= 2);
    let store = MemoryStore::<A, u64>::builder(algorithm)
        .shards(shards)
        .build()
        .unwrap();
    let mut model = crate::model::model(spec);
    let mut t = 0u64;
    let cap = spec.capacity();
    for (i, &(mode, raw, key, cost_mode, sweep)) in steps.iter().enumerate() {
        t = t.saturating_add(gap(mode, raw, horizon, wrap));
        let key = u64::from(key);
        let cost = match cost_mode {
            0 => 0,
            1 => cap,
            2 => cap + 1,
            _ => 1,
        };
        if sweep {
            // A whole sweep, or a bounded upkeep step (which, with these
            // few keys, is a whole pass too).
            if raw % 2 == 0 {
                store.sweep(t);
            } else {
                store.maintain(t);
            }
        }
        let want = model.check(&key, cost, t);
        let got = store.check(&key, cost, t).value().unwrap();
        prop_assert!(
            agree(&got, &want),
            "step {i} t={t} key={key} cost={cost}: got {got:?}, want {want:?} ({spec:?})"
        );
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<(u8, u64, u8, u8, bool)>> {
    prop::collection::vec(
        (
            0u8..7,
            any::<u64>(),
            0u8..3,
            0u8..5,
            prop::bool::weighted(0.2),
        ),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Limits whose reduced denominator is large, so the horizon is short
    /// (7919 per 1s: about 6.7 days; 4294967311 per 1ns: about a second).
    #[test]
    fn idle_keys_never_wrap(
        limit in prop_oneof![
            Just(7_919u64),
            Just(1_000_003),
            Just(999_999_937),
            Just(4_294_967_311),
        ],
        period in prop_oneof![Just(1_000_000_000u64), Just(1_000_000), Just(7), Just(1)],
        kind in 0u8..4,
        burst in prop_oneof![Just(1u64), 1u64..20],
        steps in steps(),
        shards in prop_oneof![Just(1usize), Just(8)],
    ) {
        let p = Duration::from_nanos(period);
        match kind {
            0 => {
                let a = Gcra::with_burst(limit, p, burst).unwrap();
                replay(a, Spec::Gcra { limit, period, burst }, &steps, shards)?;
            }
            1 => {
                let a = LeakyBucket::new(limit, p, burst - 1).unwrap();
                replay(a, Spec::Leaky { limit, period, queue: burst - 1 }, &steps, shards)?;
            }
            2 => {
                let a: AnyAlgorithm = Gcra::with_burst(limit, p, burst).unwrap().into();
                replay(a, Spec::Gcra { limit, period, burst }, &steps, shards)?;
            }
            _ => {
                // The default burst (= limit), when B * T fits.
                if let Ok(a) = Gcra::new(limit, p) {
                    replay(a, Spec::Gcra { limit, period, burst: limit }, &steps, shards)?;
                }
            }
        }
    }
}

/// Nanoseconds until a stale 16-byte state would read as one in the future:
/// 2^127 scaled units, rounded up (`u64::MAX` if later).
fn half_wrap_ns_wide(limit: u64, period: u64) -> u64 {
    let scale = u128::from(limit / gcd(limit, period));
    u64::try_from((1u128 << 127).div_ceil(scale)).unwrap_or(u64::MAX)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The 16-byte state wraps only after 2^128 scaled units, beyond any
    /// `u64` time unless more than 2^63 units pass per nanosecond; its idle
    /// horizon, 2^126 units (146 to 292 years at those rates), must still
    /// keep a stale state from being misread, with gaps of up to `u64`
    /// time.
    #[test]
    fn idle_wide_keys_never_wrap(
        // The largest primes below 2^64 and 2^63, and 2^63 + 1 per 1ns or
        // 7ns.
        limit in prop_oneof![
            Just(18_446_744_073_709_551_557u64),
            Just(9_223_372_036_854_775_783),
            Just((1u64 << 63) + 1),
        ],
        period in prop_oneof![Just(1u64), Just(7)],
        kind in 0u8..4,
        burst in prop_oneof![Just(1u64), 1u64..20],
        steps in steps(),
        shards in prop_oneof![Just(1usize), Just(8)],
    ) {
        let p = Duration::from_nanos(period);
        let wrap = half_wrap_ns_wide(limit, period);
        match kind {
            0 => {
                let a = Gcra::with_burst_wide(limit, p, burst).unwrap();
                replay_with(a, Spec::Gcra { limit, period, burst }, &steps, shards, wrap)?;
            }
            1 if limit < 1 << 63 => {
                // (The model's leaky bucket counts in i128: t * L < 2^127.)
                let a = AnyLeakyBucket::new(limit, p, burst - 1).unwrap();
                prop_assert!(a.is_wide());
                let a: AnyAlgorithm = a.into();
                let spec = Spec::Leaky { limit, period, queue: burst - 1 };
                replay_with(a, spec, &steps, shards, wrap)?;
            }
            _ => {
                let a = AnyGcra::with_burst(limit, p, burst).unwrap();
                prop_assert!(a.is_wide());
                let a: AnyAlgorithm = a.into();
                replay_with(a, Spec::Gcra { limit, period, burst }, &steps, shards, wrap)?;
            }
        }
    }
}

/// One key left idle for whole wraps of its scaled time, in a shard nobody
/// else touches: its stale state would read as just written.
#[test]
fn a_key_idle_for_whole_wraps_is_fresh() {
    let (limit, period) = (7_919u64, 1_000_000_000u64);
    let gcra = Gcra::new(limit, Duration::from_nanos(period)).unwrap();
    let horizon = gcra.idle_horizon();
    let wrap = wrap_ns(limit, period);
    // About 6.7 days and 27 days.
    assert!(horizon > 500_000_000_000_000 && wrap > 4 * horizon);
    for k in 1..=5u64 {
        for delta in [0u64, 1, 2, 1_000] {
            let store = MemoryStore::<Gcra, u64>::builder(gcra)
                .shards(1)
                .build()
                .unwrap();
            let mut model = crate::model::model(Spec::Gcra {
                limit,
                period,
                burst: limit,
            });
            // Exhaust the key, then come back after k wraps.
            for (t, cost) in [
                (0, limit),
                (0, 1),
                (k * wrap + delta, limit),
                (k * wrap + delta, 1),
            ] {
                let got = store.check(&1, cost, t).value().unwrap();
                let want = model.check(&1, cost, t);
                assert!(
                    agree(&got, &want),
                    "k={k} delta={delta} t={t}: {got:?} vs {want:?}"
                );
            }
            // And the same with a sweep first.
            let store = MemoryStore::<Gcra, u64>::builder(gcra)
                .shards(1)
                .build()
                .unwrap();
            assert!(store.check(&1, limit, 0).value().unwrap().allowed);
            store.sweep(k * wrap + delta);
            assert!(
                store
                    .check(&1, limit, k * wrap + delta)
                    .value()
                    .unwrap()
                    .allowed
            );
        }
    }
}
