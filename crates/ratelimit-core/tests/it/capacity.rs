//! The store at its cap (eviction, refusal), the lock-free denied path's
//! invalidation, and bounded upkeep.

use ratelimit_core::store::AtCapacity;
use ratelimit_core::store::Upkeep;
use ratelimit_core::{Gcra, MemoryStore, SlidingLog, Store, StoreError};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
const SEC: u64 = 1_000_000_000;

/// A flood of distinct keys three times the cap: the table stays at the
/// cap, a brand-new client is never admitted past its limit, and once the
/// flood's states are full again it gets exactly its limit.
#[test]
fn new_clients_are_limited_at_the_cap() {
    let store = MemoryStore::<_, u64>::builder(Gcra::new(2, HOUR).unwrap())
        .shards(4)
        .max_keys(Some(100))
        .build()
        .unwrap();
    for key in 0..300u64 {
        // A flood key may start as used as the evicted keys that share
        // its cells of the sketch, so it may be denied.
        store.check(&key, 1, key).value().unwrap();
        assert!(store.len() <= 100, "{} keys", store.len());
    }
    // So may a newcomer within the hour: it is never admitted more.
    let now = 400;
    let admitted = (0..3)
        .filter(|_| store.check(&1_000_000u64, 1, now).value().unwrap().allowed)
        .count();
    assert!(admitted <= 2, "{admitted} admitted");
    let later = 3600 * SEC + 400;
    let newcomer = 2_000_000u64;
    assert!(store.check(&newcomer, 1, later).value().unwrap().allowed);
    assert!(store.check(&newcomer, 1, later).value().unwrap().allowed);
    let third = store.check(&newcomer, 1, later).value().unwrap();
    assert!(!third.allowed);
    assert_eq!(third.remaining, 0);
}

#[test]
fn refuse_fails_new_keys_until_old_ones_are_full() {
    let store = MemoryStore::<_, u64>::builder(Gcra::new(1, Duration::from_secs(1)).unwrap())
        .shards(1)
        .max_keys(Some(10))
        .at_capacity(AtCapacity::Refuse)
        .build()
        .unwrap();
    for key in 0..10u64 {
        assert!(store.check(&key, 1, 0).value().unwrap().allowed);
    }
    assert_eq!(
        store.check(&99, 1, 0).value(),
        Err(StoreError::CapacityExceeded { max_keys: 10 })
    );
    // Known keys are still limited exactly.
    assert!(!store.check(&3, 1, 0).value().unwrap().allowed);
    // A second later every state is full: a new key takes a full key's place.
    assert!(store.check(&99, 1, SEC).value().unwrap().allowed);
    assert!(store.len() <= 10);
}

/// With the whole shard in the sample, the key evicted is the one whose
/// state is nearest to full.
#[test]
fn evicts_the_key_nearest_to_full() {
    // Burst 10, one unit back per hour: key `i` used `i + 1` units.
    let gcra = Gcra::with_burst(1, HOUR, 10).unwrap();
    let store = MemoryStore::<_, u64>::builder(gcra)
        .shards(1)
        .max_keys(Some(8))
        .build()
        .unwrap();
    for key in 0..8u64 {
        assert!(store.check(&key, key + 1, 0).value().unwrap().allowed);
    }
    assert!(store.check(&100, 1, 0).value().unwrap().allowed);
    assert_eq!(store.len(), 8);
    // Key 0 (one unit used) was evicted: it comes back as used as it
    // left. The others kept their state.
    assert_eq!(store.check(&0, 0, 0).value().unwrap().remaining, 9);
    for key in 1..8u64 {
        assert_eq!(
            store.check(&key, 0, 0).value().unwrap().remaining,
            10 - key - 1
        );
    }
}

/// Sliding logs too: the key whose newest entry is oldest goes first.
#[test]
fn evicts_the_oldest_log() {
    let store = MemoryStore::<_, u64>::builder(SlidingLog::new(5, HOUR).unwrap())
        .shards(1)
        .max_keys(Some(4))
        .build()
        .unwrap();
    for key in 0..4u64 {
        assert!(
            store
                .check(&key, 1, (key + 1) * SEC)
                .value()
                .unwrap()
                .allowed
        );
    }
    assert!(store.check(&9, 1, 10 * SEC).value().unwrap().allowed);
    // Key 0 went, and comes back with its one entry.
    assert_eq!(store.check(&0, 0, 10 * SEC).value().unwrap().remaining, 4);
    assert_eq!(store.check(&3, 0, 10 * SEC).value().unwrap().remaining, 4);
}

/// A remembered denial is forgotten when a refund changes the state.
#[test]
fn a_refund_clears_a_remembered_denial() {
    let store = MemoryStore::<_, String>::new(Gcra::new(1, HOUR).unwrap());
    assert!(store.check("k", 1, 0).value().unwrap().allowed);
    for _ in 0..3 {
        assert!(!store.check("k", 1, 5).value().unwrap().allowed);
    }
    store.refund("k", 1, 0, 6).value().unwrap();
    assert!(store.check("k", 1, 7).value().unwrap().allowed);
    assert!(!store.check("k", 1, 8).value().unwrap().allowed);
}

/// An evicted key that was denied is forgotten by the deny slots, and
/// comes back from the sketch of evicted keys still denied, with the
/// same wait.
#[test]
fn an_evicted_denied_key_comes_back_denied() {
    let store = MemoryStore::<_, u64>::builder(Gcra::new(1, HOUR).unwrap())
        .shards(1)
        .max_keys(Some(1))
        .build()
        .unwrap();
    assert!(store.check(&1, 1, 0).value().unwrap().allowed);
    let denied = store.check(&1, 1, 1).value().unwrap();
    assert!(!denied.allowed);
    assert!(store.check(&2, 1, 2).value().unwrap().allowed);
    let again = store.check(&1, 1, 3).value().unwrap();
    assert!(!again.allowed);
    assert!(again.wait >= denied.wait.map(|w| w - Duration::from_nanos(2)));
    // Once its hour is over it is admitted again.
    assert!(store.check(&1, 1, 3600 * SEC + 3).value().unwrap().allowed);
}

/// A remembered denial answers exactly as the locked path, as time moves
/// within it, and stops at the instant the key is admitted again.
#[test]
fn a_remembered_denial_expires_exactly() {
    let store = MemoryStore::<_, u64>::new(Gcra::new(3, Duration::from_secs(1)).unwrap());
    let locked = MemoryStore::<_, u64>::builder(Gcra::new(3, Duration::from_secs(1)).unwrap())
        .deny_cache(false)
        .build()
        .unwrap();
    for s in [&store, &locked] {
        for _ in 0..3 {
            assert!(s.check(&7, 1, 0).value().unwrap().allowed);
        }
    }
    let first = store.check(&7, 1, 10).value().unwrap();
    assert!(!first.allowed);
    let next = 10 + first.wait.unwrap().as_nanos() as u64;
    for t in [11, 1000, next - 1] {
        assert_eq!(
            store.check(&7, 1, t).value(),
            locked.check(&7, 1, t).value(),
            "at {t}"
        );
    }
    assert!(store.check(&7, 1, next).value().unwrap().allowed);
}

/// `maintain` drops full keys in bounded steps until none are left.
#[test]
fn maintain_empties_the_store_in_steps() {
    let store = MemoryStore::<_, u64>::builder(Gcra::new(10, Duration::from_secs(1)).unwrap())
        .shards(2)
        .build()
        .unwrap();
    for key in 0..100_000u64 {
        store.check(&key, 1, 0).value().unwrap();
    }
    assert_eq!(store.len(), 100_000);
    // Within the period nothing is full.
    assert_eq!(store.maintain(SEC / 20), 0);
    let mut calls = 0;
    while !store.is_empty() {
        store.maintain(2 * SEC);
        calls += 1;
        assert!(calls <= 16, "{} keys left after {calls} calls", store.len());
    }
    // Each call sweeps at most 16,384 buckets per shard.
    assert!(calls >= 2, "one call swept {} buckets", 100_000);
}

/// By default a capped store gives each shard at least 32 keys of its
/// cap, whatever the host's CPUs: a small cap is held whole, and shards
/// set by hand are kept (up to the cap).
#[test]
fn a_small_cap_is_not_split_over_many_shards() {
    let gcra = || Gcra::new(1, HOUR).unwrap();
    let shards = |store: &MemoryStore<Gcra, u64>| {
        let debug = format!("{store:?}");
        let at = debug.find("shards: ").unwrap() + "shards: ".len();
        debug[at..]
            .split(',')
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let capped = |cap| {
        MemoryStore::<Gcra, u64>::builder(gcra())
            .max_keys(Some(cap))
            .at_capacity(AtCapacity::Refuse)
            .build()
            .unwrap()
    };
    let store = capped(63);
    assert_eq!(shards(&store), 1);
    for key in 0..63u64 {
        assert!(
            store.check(&key, 1, 0).value().unwrap().allowed,
            "key {key}"
        );
    }
    assert!(matches!(
        store.check(&63u64, 1, 0).value(),
        Err(StoreError::CapacityExceeded { .. })
    ));
    assert_eq!(shards(&capped(1_000)), 16);
    assert!((32..=1024).contains(&shards(&capped(100_000))));
    assert!(shards(&MemoryStore::new(gcra())) >= 32);
    let by_hand = MemoryStore::<Gcra, u64>::builder(gcra())
        .shards(64)
        .max_keys(Some(1_000))
        .build()
        .unwrap();
    assert_eq!(shards(&by_hand), 64);
}

/// A store is capped unless it says otherwise: `MemoryStore::new` holds
/// at most `DEFAULT_MAX_KEYS`, and `max_keys(None)` lifts the cap.
#[test]
fn a_store_is_capped_by_default() {
    use ratelimit_core::store::DEFAULT_MAX_KEYS;
    let gcra = Gcra::new(2, HOUR).unwrap();
    let store: MemoryStore<Gcra, u64> = MemoryStore::new(gcra);
    assert_eq!(store.max_keys(), Some(DEFAULT_MAX_KEYS));
    assert_eq!(DEFAULT_MAX_KEYS, 1_000_000);
    let built: MemoryStore<Gcra, u64> = MemoryStore::builder(gcra).build().unwrap();
    assert_eq!(built.max_keys(), Some(DEFAULT_MAX_KEYS));
    let open: MemoryStore<Gcra, u64> = MemoryStore::builder(gcra).max_keys(None).build().unwrap();
    assert_eq!(open.max_keys(), None);
}

/// A cap of 0 keys and a shard count out of range fail at build, naming
/// the setting and its value: nothing is clamped in silence.
#[test]
fn settings_out_of_range_fail_at_build() {
    let gcra = Gcra::new(2, HOUR).unwrap();
    let build = |b: ratelimit_core::store::MemoryStoreBuilder<Gcra, u64>| {
        b.build().map(|_| ()).unwrap_err().to_string()
    };
    let zero = build(MemoryStore::builder(gcra).max_keys(Some(0)));
    assert!(zero.contains("max_keys Some(0)"), "{zero}");
    assert!(build(MemoryStore::builder(gcra).shards(0)).contains("shards 0"));
    let many = build(MemoryStore::builder(gcra).shards(1 << 17));
    assert!(many.contains("shards 131072"), "{many}");
    assert!(MemoryStore::<Gcra, u64>::builder(gcra)
        .shards(1 << 16)
        .max_keys(Some(1))
        .build()
        .is_ok());
}
