//! Eviction at the cap never gives quota back: what a key is admitted
//! through evictions under a flood of new keys keeps its limit exactly,
//! for every algorithm, however the flood and the checks interleave.

use proptest::prelude::*;
use ratelimit_core::store::Upkeep;
use ratelimit_core::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog, SlidingWindow, Store,
    TokenBucket,
};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
const SEC: u64 = 1_000_000_000;

/// One step of a trace: how far time moves, how many new keys flood the
/// store, how many earlier flood keys come back (picked by the seed),
/// then which of the 4 victims is checked, and at what cost.
type Step = (u64, u16, u16, u64, u8, u64);

/// Replays `steps` through a store capped at `cap` keys (one shard),
/// then replays what it admitted of every key, victims and flood keys
/// alike, through an uncapped store: every one of those requests is
/// admitted there too, so what the capped store admitted keeps each
/// key's limit exactly, however often the key was evicted and whether or
/// not its return was covered by the set of evicted keys or only by the
/// sketch past the set's bound.
fn admitted_through_evictions_conform<A: Algorithm>(
    make: impl Fn() -> A,
    cap: usize,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let capped = MemoryStore::<A, u64>::builder(make())
        .shards(1)
        .max_keys(Some(cap))
        .build()
        .unwrap();
    let (mut now, mut next_key) = (0u64, VICTIMS);
    let mut admitted = Vec::new();
    let mut check = |key: u64, cost: u64, now: u64| {
        if capped.check(&key, cost, now).value().unwrap().allowed {
            admitted.push((key, now, cost));
        }
    };
    for &(dt, new, old, seed, victim, cost) in steps {
        now += dt;
        for _ in 0..new {
            check(next_key, 1, now);
            next_key += 1;
        }
        let flooded = next_key - VICTIMS;
        for i in 0..u64::from(old).min(flooded) {
            let back = seed.wrapping_add(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) % flooded;
            check(VICTIMS + back, 1, now);
        }
        check(u64::from(victim) % VICTIMS, cost, now);
    }
    let exact = MemoryStore::<A, u64>::builder(make())
        .shards(1)
        .build()
        .unwrap();
    for (key, at, cost) in admitted {
        let decision = exact.check(&key, cost, at).value().unwrap();
        prop_assert!(
            decision.allowed,
            "key {key}, cost {cost} at {at}: {decision:?}"
        );
    }
    Ok(())
}

/// Keys 0 to 3 are the victims; flood keys follow.
const VICTIMS: u64 = 4;

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            prop_oneof![Just(0u64), 0..SEC, 0..100 * SEC, 0..4000 * SEC],
            // Up to 400 new keys a step: past the bound of the set of
            // evicted keys of a small shard within a period.
            prop_oneof![Just(0u16), 1u16..4, 1u16..64, 100u16..400],
            prop_oneof![Just(0u16), 1u16..8, 1u16..64],
            any::<u64>(),
            any::<u8>(),
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
            .build()
            .unwrap();
        let mut admitted = 0;
        // The flood spread over 50 minutes; the victim tries every 10 keys.
        let step_ns = 3_000 * SEC / flood;
        for step in 0..flood {
            let now = step * step_ns;
            store.check(&(step + 1), 1, now).value().unwrap();
            if step % 10 == 0 && store.check(&0, 1, now).value().unwrap().allowed {
                admitted += 1;
            }
        }
        assert!(store.len() <= cap);
        assert_eq!(admitted, 5, "cap {cap}");
    }
}

/// What a flood of `flood` new keys, each checked `uses` times in a row
/// (spread over 10 minutes), through a store capped at `cap` keys leaves
/// for 1,000 keys never seen before, at `probe_at`: how many get their
/// whole limit at their first check (admitted, with 4 of 5 left), and the
/// store's counts.
fn newcomers_after(
    cap: usize,
    flood: u64,
    uses: u64,
    probe_at: u64,
) -> (usize, ratelimit_core::store::StoreCounts) {
    let store = MemoryStore::<_, u64>::builder(SlidingLog::new(5, HOUR).unwrap())
        .max_keys(Some(cap))
        .build()
        .unwrap();
    let step_ns = 600 * SEC / flood;
    for step in 0..flood {
        for _ in 0..uses {
            store.check(&(step + 1), 1, step * step_ns).value().unwrap();
        }
    }
    let whole = (0..1_000u64)
        .filter(|n| {
            let first = store.check(&(u64::MAX - n), 1, probe_at).value().unwrap();
            first.allowed && first.remaining == 4
        })
        .count();
    assert!(store.len() <= cap);
    (whole, store.counts().unwrap())
}

const AFTER_FLOOD: u64 = 600 * SEC;

/// Under a flood of `flood` keys at a cap of `cap`, each flood key used
/// as many times as each of `uses` says (once, a few times, fully): at
/// least 99 % of newcomers get their whole limit at first sight, and at
/// most 1 % of the flood's checks start from the sketch's cells.
fn newcomers_keep_their_whole_limit(cap: usize, flood: u64, uses: &[u64]) {
    for &uses in uses {
        let (whole, counts) = newcomers_after(cap, flood, uses, AFTER_FLOOD);
        assert!(whole >= 990, "{uses} uses: {whole} {counts:?}");
        let evicted = flood - cap as u64;
        assert!(
            counts.evicted >= evicted - evicted / 50,
            "{uses} uses: {counts:?}"
        );
        assert!(
            counts.restored <= flood * uses / 100,
            "{uses} uses: {counts:?}"
        );
    }
}

#[test]
fn newcomers_keep_their_whole_limit_under_50_000_flood_keys_at_a_cap_of_1_000() {
    newcomers_keep_their_whole_limit(1_000, 50_000, &[1, 2, 5]);
}

#[test]
fn newcomers_keep_their_whole_limit_under_88_000_flood_keys_at_a_cap_of_20_000() {
    newcomers_keep_their_whole_limit(20_000, 88_000, &[1, 5]);
}

/// The cost of never forgiving, as ALGORITHMS.md states it: a flood of 5
/// times the cap (one request per key, 5 per hour allowed) refuses no new
/// key, and leaves at least 99 % of them their whole limit (the few the
/// set of evicted keys mistakes for evicted ones start partly used); a
/// flood of 200 times the cap, past the set's bound, makes most new keys
/// start from the sketch's cells, used up, which the store counts as
/// refused new keys; one period after the flood every new key starts
/// fresh again.
#[test]
fn a_key_flood_past_the_sets_bound_costs_newcomers_for_at_most_a_period_and_is_counted() {
    let (whole, counts) = newcomers_after(1_000, 5_000, 1, AFTER_FLOOD);
    assert!(whole >= 990, "{whole} {counts:?}");
    assert!(counts.evicted >= 4_000, "{counts:?}");
    assert_eq!(counts.refused, 0, "{counts:?}");

    let (whole, counts) = newcomers_after(1_000, 200_000, 1, AFTER_FLOOD);
    assert!(whole < 500, "{whole} {counts:?}");
    assert!(counts.refused >= 10_000, "{counts:?}");
    assert!(counts.restored >= counts.refused, "{counts:?}");

    let a_period_later = AFTER_FLOOD + HOUR.as_nanos() as u64;
    let (whole, _) = newcomers_after(1_000, 200_000, 1, a_period_later);
    assert_eq!(whole, 1_000);
}
