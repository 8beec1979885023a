//! The hot slot: a key whose checks meet its shard's lock held twice in a
//! row (here: any key checked twice in a row, `promote_always`) has its
//! state kept beside the lock. Every change to the table (inserts that grow it,
//! sweeps, shrinks, refunds, evictions, clears) must see that state, and
//! bucket indexes must not move under it. Random operations are replayed
//! on a store and on bare per-key states of the algorithm; every decision
//! must match.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use ratelimit_core::store::Upkeep;
use ratelimit_core::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog, Store, TokenBucket,
};
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    /// Check one of a few keys (so some are checked twice in a row).
    Check { key: u64, cost: u64 },
    /// Check this many new keys once each: the table grows.
    Flood(u16),
    /// Give back cost 1 admitted now.
    Refund { key: u64 },
    /// A bounded upkeep step (drops full keys, shrinks at the end of a pass).
    Maintain,
    /// A whole sweep and shrink.
    Sweep,
    /// Drop every key.
    Clear,
    /// Move the time on.
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u64..3, prop_oneof![3 => Just(1u64), 1 => 0u64..4])
            .prop_map(|(key, cost)| Op::Check { key, cost }),
        1 => (1u16..300).prop_map(Op::Flood),
        1 => (0u64..3).prop_map(|key| Op::Refund { key }),
        1 => Just(Op::Maintain),
        1 => Just(Op::Sweep),
        1 => Just(Op::Clear),
        2 => (0u64..400_000_000).prop_map(Op::Advance),
    ]
}

/// Replays `ops` on a store with `shards` shards and on bare states.
fn replay<A: Algorithm + Clone>(
    algorithm: A,
    shards: usize,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let store = MemoryStore::<A, u64>::builder(algorithm.clone())
        .shards(shards)
        .promote_always(true)
        .build()
        .unwrap();
    let mut bare: HashMap<u64, A::State> = HashMap::new();
    let mut now = 1_000_000_000u64;
    let mut next_new = 1_000u64;
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Check { key, cost } => {
                let state = bare
                    .entry(key)
                    .or_insert_with(|| algorithm.fresh(&key, now));
                let want = algorithm.check(state, cost, now);
                let got = store.check(&key, cost, now).value().expect("no cap");
                prop_assert_eq!(got, want, "op #{} {:?} in {:?}", i, op, ops);
            }
            Op::Flood(n) => {
                for _ in 0..n {
                    let key = next_new;
                    next_new += 1;
                    let state = bare
                        .entry(key)
                        .or_insert_with(|| algorithm.fresh(&key, now));
                    let want = algorithm.check(state, 1, now);
                    let got = store.check(&key, 1, now).value().expect("no cap");
                    prop_assert_eq!(got, want, "op #{} new key {}", i, key);
                }
            }
            Op::Refund { key } => {
                if let Some(state) = bare.get_mut(&key) {
                    algorithm.refund(state, 1, now, now);
                }
                store.refund(&key, 1, now, now).value().unwrap();
            }
            Op::Maintain => {
                store.maintain(now);
            }
            Op::Sweep => {
                store.sweep(now);
            }
            Op::Clear => {
                store.clear();
                bare.clear();
            }
            Op::Advance(dt) => now += dt,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn gcra_hot_keys_survive_table_changes(
        ops in prop::collection::vec(op(), 1..80),
        shards in prop_oneof![Just(1usize), Just(4)],
    ) {
        let gcra = Gcra::with_burst(5, Duration::from_secs(1), 8).unwrap();
        replay(gcra, shards, &ops)?;
    }

    #[test]
    fn log_keys_survive_table_changes(
        ops in prop::collection::vec(op(), 1..80),
        shards in prop_oneof![Just(1usize), Just(4)],
    ) {
        let log = SlidingLog::new(4, Duration::from_millis(700)).unwrap();
        replay(log, shards, &ops)?;
    }

    #[test]
    fn token_bucket_hot_keys_survive_table_changes(
        ops in prop::collection::vec(op(), 1..80),
        shards in prop_oneof![Just(1usize), Just(4)],
    ) {
        let bucket = TokenBucket::new(6, 4, Duration::from_millis(800)).unwrap();
        replay(bucket, shards, &ops)?;
    }

    #[test]
    fn leaky_bucket_hot_keys_survive_table_changes(
        ops in prop::collection::vec(op(), 1..80),
        shards in prop_oneof![Just(1usize), Just(4)],
    ) {
        let bucket = LeakyBucket::new(3, Duration::from_millis(600), 5).unwrap();
        replay(bucket, shards, &ops)?;
    }

    /// States over 8 bytes stay in their buckets; the same replay holds.
    #[test]
    fn window_keys_survive_table_changes(
        ops in prop::collection::vec(op(), 1..80),
        shards in prop_oneof![Just(1usize), Just(4)],
    ) {
        let window = FixedWindow::new(3, Duration::from_millis(500)).unwrap();
        replay(window, shards, &ops)?;
    }
}

/// A hot key is the one evicted at the cap: it comes back as used as it
/// left, and the key that took its place is limited from its own first
/// check.
#[test]
fn an_evicted_hot_key_comes_back_as_used() {
    let gcra = Gcra::new(3, Duration::from_secs(3600)).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(1)
        .max_keys(Some(1))
        .promote_always(true)
        .build()
        .unwrap();
    for _ in 0..3 {
        assert!(store.check(&1, 1, 0).value().unwrap().allowed);
    }
    assert!(!store.check(&1, 1, 0).value().unwrap().allowed);
    // Key 2 evicts key 1, the only key, while its state is in the slot.
    assert!(store.check(&2, 1, 0).value().unwrap().allowed);
    assert!(store.check(&2, 1, 0).value().unwrap().allowed);
    assert_eq!(store.len(), 1);
    // Key 1 comes back denied: eviction gives back nothing it had used.
    let back = store.check(&1, 1, 0).value().unwrap();
    assert!(!back.allowed);
    assert_eq!(back.remaining, 0);
    // Key 2 was evicted in turn, with two used.
    assert_eq!(store.check(&2, 1, 0).value().unwrap().remaining, 0);
}
