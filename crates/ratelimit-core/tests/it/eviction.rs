//! Eviction at the cap never gives quota back: what a key is admitted
//! through evictions under a flood of new keys keeps its limit exactly,
//! for every algorithm, however the flood and the checks interleave.

use proptest::prelude::*;
use ratelimit_core::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog, SlidingWindow, TokenBucket,
};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
const SEC: u64 = 1_000_000_000;

/// One step of the victim's trace: how far time moves, how many new keys
/// flood the store first, and the victim's cost.
type Step = (u64, u16, u64);

/// Replays `steps` through a store capped at `cap` keys (one shard),
/// then replays what it admitted of the victim (key 0) through an
/// uncapped store: every one of those requests is admitted there too, so
/// what the capped store admitted keeps the limit exactly.
fn admitted_through_evictions_conform<A: Algorithm>(
    make: impl Fn() -> A,
    cap: usize,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let capped = MemoryStore::<A, u64>::builder(make())
        .shards(1)
        .max_keys(Some(cap))
        .build();
    let (mut now, mut next_key) = (0u64, 1u64);
    let mut admitted = Vec::new();
    for &(dt, flood, cost) in steps {
        now += dt;
        for _ in 0..flood {
            capped.check_now(&next_key, 1, now).unwrap();
            next_key += 1;
        }
        if capped.check_now(&0, cost, now).unwrap().allowed {
            admitted.push((now, cost));
        }
    }
    let exact = MemoryStore::<A, u64>::builder(make()).shards(1).build();
    for (at, cost) in admitted {
        let decision = exact.check_now(&0, cost, at).unwrap();
        prop_assert!(decision.allowed, "cost {cost} at {at}: {decision:?}");
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            prop_oneof![Just(0u64), 0..SEC, 0..100 * SEC, 0..4000 * SEC],
            prop_oneof![Just(0u16), 1u16..4, 1u16..64],
            prop_oneof![Just(1u64), 1u64..4],
        ),
        1..40,
    )
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn eviction_gives_nothing_back(
        kind in 0u8..6,
        limit in 1u64..8,
        cap in 1usize..8,
        steps in steps(),
    ) {
        match kind {
            0 => admitted_through_evictions_conform(|| Gcra::new(limit, HOUR).unwrap(), cap, &steps)?,
            1 => admitted_through_evictions_conform(
                || TokenBucket::new(limit, 1, HOUR / 4).unwrap(), cap, &steps)?,
            2 => admitted_through_evictions_conform(
                || LeakyBucket::new(limit, HOUR, limit).unwrap(), cap, &steps)?,
            3 => admitted_through_evictions_conform(|| FixedWindow::new(limit, HOUR).unwrap(), cap, &steps)?,
            4 => admitted_through_evictions_conform(|| SlidingWindow::new(limit, HOUR).unwrap(), cap, &steps)?,
            _ => admitted_through_evictions_conform(|| SlidingLog::new(limit, HOUR).unwrap(), cap, &steps)?,
        }
    }
}

/// The churn case of the example: 5 failed logins an hour from one
/// address, while a flood of new addresses (100 times the cap, or 1.2
/// million against a cap of a million) goes through a capped store. The
/// brute-forcer gets its 5, and not one more, within the hour.
#[test]
fn a_flood_of_new_keys_does_not_forgive_a_brute_forcer() {
    for (cap, flood) in [
        (100usize, 10_000u64),
        (1_000, 100_000),
        (1_000_000, 1_200_000),
    ] {
        let store = MemoryStore::<_, u64>::builder(FixedWindow::new(5, HOUR).unwrap())
            .max_keys(Some(cap))
            .build();
        let mut admitted = 0;
        // The flood spread over 50 minutes; the victim tries every 10 keys.
        let step_ns = 3_000 * SEC / flood;
        for step in 0..flood {
            let now = step * step_ns;
            store.check_now(&(step + 1), 1, now).unwrap();
            if step % 10 == 0 && store.check_now(&0, 1, now).unwrap().allowed {
                admitted += 1;
            }
        }
        assert!(store.len() <= cap);
        assert_eq!(admitted, 5, "cap {cap}");
    }
}

/// What a flood of `flood` new keys (one request each, over 10 minutes)
/// through a store capped at 1,000 keys leaves for 1,000 keys never seen
/// before, at `probe_at`: how many are admitted at their first check.
fn newcomers_admitted_after(flood: u64, probe_at: u64) -> (usize, ratelimit_core::StoreCounts) {
    let store = MemoryStore::<_, u64>::builder(SlidingLog::new(5, HOUR).unwrap())
        .max_keys(Some(1_000))
        .build();
    let step_ns = 600 * SEC / flood;
    for step in 0..flood {
        store.check_now(&(step + 1), 1, step * step_ns).unwrap();
    }
    let admitted = (0..1_000u64)
        .filter(|n| {
            store
                .check_now(&(u64::MAX - n), 1, probe_at)
                .unwrap()
                .allowed
        })
        .count();
    assert!(store.len() <= 1_000);
    (admitted, store.counts())
}

/// The cost of never forgiving, as ALGORITHMS.md states it: a flood of up
/// to 5 times the cap (one request per key, 5 per hour allowed) leaves
/// every new key admitted; a flood of 50 times the cap makes most new keys
/// start used up, which the store counts as refused new keys; one period
/// after the flood every new key starts fresh again.
#[test]
fn a_key_flood_past_the_cap_costs_newcomers_for_at_most_a_period_and_is_counted() {
    let after_flood = 600 * SEC;
    let (admitted, counts) = newcomers_admitted_after(5_000, after_flood);
    assert_eq!(admitted, 1_000, "{counts:?}");
    assert!(counts.evicted >= 4_000, "{counts:?}");
    assert_eq!(counts.refused, 0, "{counts:?}");

    let (admitted, counts) = newcomers_admitted_after(50_000, after_flood);
    assert!(admitted < 500, "{admitted} {counts:?}");
    assert!(counts.refused >= 10_000, "{counts:?}");
    assert!(counts.restored >= counts.refused, "{counts:?}");

    let a_period_later = after_flood + HOUR.as_nanos() as u64;
    let (admitted, _) = newcomers_admitted_after(50_000, a_period_later);
    assert_eq!(admitted, 1_000);
}
