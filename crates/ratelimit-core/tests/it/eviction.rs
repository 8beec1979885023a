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
            capped.check_sync(&next_key, 1, now).unwrap();
            next_key += 1;
        }
        if capped.check_sync(&0, cost, now).unwrap().allowed {
            admitted.push((now, cost));
        }
    }
    let exact = MemoryStore::<A, u64>::builder(make()).shards(1).build();
    for (at, cost) in admitted {
        let decision = exact.check_sync(&0, cost, at).unwrap();
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
            store.check_sync(&(step + 1), 1, now).unwrap();
            if step % 10 == 0 && store.check_sync(&0, 1, now).unwrap().allowed {
                admitted += 1;
            }
        }
        assert!(store.len() <= cap);
        assert_eq!(admitted, 5, "cap {cap}");
    }
}
