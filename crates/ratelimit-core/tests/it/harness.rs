//! Replays random traces through a [`MemoryStore`] (the path users get) and
//! directly through the [`Algorithm`], comparing every decision with the
//! reference model, and checking the contract's definitions of `wait` and
//! `remaining` by brute force on copies of the state.

use crate::model::{Out, Spec};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ratelimit_core::{Algorithm, AnyAlgorithm, Decision, MemoryStore, Store};
use std::collections::HashMap;
use std::time::Duration;

/// One step of a random trace, resolved against the configuration and the
/// decisions so far by [`run`].
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// How the time moves (see [`run`]).
    pub time_mode: u8,
    /// Raw randomness for the time.
    pub time_raw: u64,
    /// The key (0..4).
    pub key: u8,
    /// How the cost is picked.
    pub cost_mode: u8,
    /// Raw randomness for the cost.
    pub cost_raw: u64,
    /// Sweep the store before this step.
    pub sweep: bool,
}

/// A random trace of up to `len` steps.
pub fn trace(len: usize) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0u8..16,
            any::<u64>(),
            0u8..4,
            0u8..10,
            any::<u64>(),
            prop::bool::weighted(0.05),
        )
            .prop_map(
                |(time_mode, time_raw, key, cost_mode, cost_raw, sweep)| Step {
                    time_mode,
                    time_raw,
                    key,
                    cost_mode,
                    cost_raw,
                    sweep,
                },
            ),
        1..len,
    )
}

/// Limits, including ones where `P / L` is not a whole number of ns.
pub fn limit() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1u64),
        Just(2),
        Just(3),
        Just(7),
        Just(10),
        Just(999),
        1u64..20,
        1u64..2_000,
        1u64..1_000_000,
    ]
}

/// Periods in nanoseconds.
pub fn period() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1_000_000_000u64),
        Just(1_000_000),
        Just(3_000_000_000),
        Just(1),
        Just(7),
        1u64..10_000,
        1u64..10_000_000_000,
    ]
}

/// The next time, chosen by `step.time_mode`: same instant (often), a
/// nanosecond or a few later, on or just before a window edge, a multiple
/// of `T` (rounded either way), exactly at or just before the retry time
/// of the key's last denial, or anywhere within a few periods.
fn next_time(spec: &Spec, t: u64, step: &Step, last_wait: Option<u64>) -> u64 {
    let p = u128::from(spec.period());
    let l = u128::from(spec.limit());
    let r = u128::from(step.time_raw);
    let t = u128::from(t);
    let next_edge = (t / p + 1 + r % 3) * p;
    let dt = match step.time_mode {
        0..=3 => 0,
        4 => 1 + r % 3,
        5 => next_edge - t,
        6 => next_edge - t - 1,
        // k * T, rounded down or up.
        7 => ((1 + r % 4) * p) / l,
        8 => ((1 + r % 4) * p).div_ceil(l),
        9 | 10 => match last_wait {
            Some(w) => u128::from(w),
            None => r % p,
        },
        11 => match last_wait {
            Some(w) => u128::from(w.saturating_sub(1)),
            None => 0,
        },
        12 => r % (4 * p),
        13 => r % p.min(1_000_000),
        _ => r % (p / l + 2),
    };
    u64::try_from(t + dt).unwrap_or(u64::MAX)
}

fn pick_cost(spec: &Spec, step: &Step) -> u64 {
    let cap = spec.capacity();
    let r = step.cost_raw;
    match step.cost_mode {
        0 => 0,
        1..=3 => 1,
        4 => 2,
        5 => cap,
        6 => cap.saturating_add(1),
        7 => r % cap.saturating_add(3),
        8 => r % 4,
        _ => 1 + r % cap.min(8),
    }
}

/// Whether a decision says what the model says.
pub fn agree(d: &Decision, o: &Out) -> bool {
    d.allowed == o.allowed
        && u128::from(d.remaining) == o.remaining
        && d.wait.map(|w| w.as_nanos()) == o.wait
}

fn fmt_decision(d: &Decision) -> String {
    format!(
        "allowed={} remaining={} wait={:?}",
        d.allowed,
        d.remaining,
        d.wait.map(|w| w.as_nanos())
    )
}

/// Replays `steps` through a store of `algorithm` with `shards` shards, and
/// through the bare algorithm, checking both against the model.
pub fn run<A>(algorithm: A, spec: Spec, steps: &[Step], shards: usize) -> Result<(), TestCaseError>
where
    A: Algorithm + Clone,
    A::State: Clone,
{
    let store = MemoryStore::<A, u64>::builder(algorithm.clone())
        .shards(shards)
        .build()
        .unwrap();
    // The same without the lock-free denied path: every field must agree.
    let locked = MemoryStore::<A, u64>::builder(algorithm.clone())
        .shards(shards)
        .deny_cache(false)
        .build()
        .unwrap();
    let mut model = crate::model::model(spec);
    // Bare states and when they were last touched.
    let mut direct: HashMap<u64, (A::State, u64)> = HashMap::new();
    let mut last_wait: HashMap<u64, u64> = HashMap::new();
    let mut t = 0u64;
    let mut log = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let key = u64::from(step.key);
        t = next_time(&spec, t, step, last_wait.get(&key).copied());
        let cost = pick_cost(&spec, step);
        if step.sweep {
            store.sweep(t);
            locked.sweep(t);
        }
        let want = model.check(&key, cost, t);
        let got = store.check(&key, cost, t).value().expect("no cap");
        log.push(format!("#{i} t={t} key={key} cost={cost}: model {want:?}"));
        let without_cache = locked.check(&key, cost, t).value().expect("no cap");
        prop_assert_eq!(
            got,
            without_cache,
            "deny cache vs locked path at {:?}\n{}",
            spec,
            log.join("\n")
        );
        prop_assert!(
            agree(&got, &want),
            "store: {} at {spec:?}\n{}",
            fmt_decision(&got),
            log.join("\n")
        );

        // The bare algorithm, and the contract's definitions by brute force.
        // A bare state may not sit untouched for the algorithm's idle
        // horizon (its scaled time could wrap); one untouched that long is
        // full, which is what a store relies on when it drops it.
        let (state, touched) = direct
            .entry(key)
            .or_insert_with(|| (algorithm.fresh(&key, t), t));
        let horizon = algorithm.idle_horizon();
        if horizon != u64::MAX && t - *touched >= horizon {
            *state = algorithm.fresh(&key, t);
        }
        *touched = t;
        let d = algorithm.check(state, cost, t);
        prop_assert!(
            agree(&d, &want),
            "algorithm: {} at {spec:?}\n{}",
            fmt_decision(&d),
            log.join("\n")
        );
        check_definitions(&algorithm, state, t, cost, &d, &spec, &log)?;
        match (d.allowed, d.wait) {
            (false, Some(w)) => {
                let w = u64::try_from(w.as_nanos()).unwrap_or(u64::MAX);
                last_wait.insert(key, w);
            }
            _ => {
                last_wait.remove(&key);
            }
        }
    }
    Ok(())
}

/// `wait` of a denial: admitted at `t + wait`, still denied a nanosecond
/// earlier. `remaining`: exactly that many requests of cost 1 at `t` are
/// admitted (checked when it is small). `state` is the state after `d`.
fn check_definitions<A>(
    algorithm: &A,
    state: &A::State,
    t: u64,
    cost: u64,
    d: &Decision,
    spec: &Spec,
    log: &[String],
) -> Result<(), TestCaseError>
where
    A: Algorithm,
    A::State: Clone,
{
    if !d.allowed {
        if let Some(w) = d.wait {
            prop_assert!(!w.is_zero(), "a denial waits\n{}", log.join("\n"));
            // Past the end of u64 time there is nothing to check.
            let Some(at) = u64::try_from(w.as_nanos())
                .ok()
                .and_then(|w| t.checked_add(w))
            else {
                return Ok(());
            };
            let mut s = state.clone();
            prop_assert!(
                algorithm.check(&mut s, cost, at).allowed,
                "not admitted at t + wait ({spec:?})\n{}",
                log.join("\n")
            );
            let mut s = state.clone();
            prop_assert!(
                !algorithm.check(&mut s, cost, at - 1).allowed,
                "admitted before t + wait ({spec:?})\n{}",
                log.join("\n")
            );
        } else {
            prop_assert!(cost > spec.capacity());
        }
    }
    // `next`: zero with quota left, else the wait of a cost-1 denial now.
    let mut s = state.clone();
    let one = algorithm.check(&mut s, 1, t);
    let want_next = if d.remaining > 0 {
        Duration::ZERO
    } else {
        prop_assert!(!one.allowed, "remaining 0 but admitted\n{}", log.join("\n"));
        one.wait.unwrap_or_default()
    };
    prop_assert_eq!(d.next, want_next, "next ({:?})\n{}", spec, log.join("\n"));
    if d.remaining <= 64 {
        let mut s = state.clone();
        for k in 0..d.remaining {
            prop_assert!(
                algorithm.check(&mut s, 1, t).allowed,
                "request {k} of remaining {} denied ({spec:?})\n{}",
                d.remaining,
                log.join("\n")
            );
        }
        prop_assert!(
            !algorithm.check(&mut s, 1, t).allowed,
            "more than remaining {} admitted ({spec:?})\n{}",
            d.remaining,
            log.join("\n")
        );
    }
    Ok(())
}

/// [`run`] on the typed algorithm and on its [`AnyAlgorithm`] form.
pub fn run_both<A>(
    algorithm: A,
    spec: Spec,
    steps: &[Step],
    shards: usize,
) -> Result<(), TestCaseError>
where
    A: Algorithm + Clone + Into<AnyAlgorithm>,
    A::State: Clone,
{
    run(algorithm.clone(), spec, steps, shards)?;
    run(algorithm.into(), spec, steps, shards)
}
