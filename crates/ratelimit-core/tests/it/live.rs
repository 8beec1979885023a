//! `LiveAlgorithm`: settings changed under a running store. Used quota
//! carries over per algorithm ("2 used of a new 4 leaves 2") and across
//! kinds, an overshoot is kept (shrinking and growing back grants
//! nothing), equal settings make no version, overrides come and go, and
//! under 64 threads every decision is made wholly under one version with
//! exact admission. The random sequences are in `live_props.rs`.

use ratelimit_core::algorithm::{LiveError, MAX_OVERRIDES};
use ratelimit_core::{AnyAlgorithm, Decision, LiveAlgorithm, MemoryStore, Store};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

fn spec(s: &str) -> AnyAlgorithm {
    s.parse().unwrap()
}

fn store(s: &str) -> (LiveAlgorithm, MemoryStore<LiveAlgorithm, String>) {
    let live = LiveAlgorithm::new(spec(s));
    (live.clone(), MemoryStore::new(live))
}

fn check(store: &MemoryStore<LiveAlgorithm, String>, key: &str, cost: u64, now: u64) -> Decision {
    store.check(key, cost, now).value().unwrap()
}

#[test]
fn two_used_of_a_new_four_leaves_two() {
    for (old, new) in [
        ("gcra 3/1h", "gcra 4/1h"),
        ("gcra 3/1h", "gcra 4/2h"),
        ("gcra 3/1h burst 3", "gcra 1/1h burst 4"),
        ("token-bucket 3 refill 1/1h", "token-bucket 4 refill 1/1h"),
        ("gcra 3/1h", "token-bucket 4 refill 4/1h"),
        ("token-bucket 3 refill 3/1m", "gcra 4/1d"),
        ("leaky-bucket 1/1h queue 2", "leaky-bucket 1/1h queue 3"),
        ("leaky-bucket 1/1h queue 2", "leaky-bucket 2/1h queue 3"),
        ("fixed-window 3/1h", "fixed-window 4/1h"),
        ("fixed-window 3/1h", "fixed-window 4/2h"),
        (
            "fixed-window 3/1h anchor first-request",
            "fixed-window 4/2h anchor first-request",
        ),
        (
            "fixed-window 3/1h anchor key-offset",
            "fixed-window 4/1h anchor key-offset",
        ),
        ("sliding-log 3/1h", "sliding-log 4/1h"),
        ("sliding-log 3/1h", "sliding-log 4/2h"),
        ("sliding-window 3/1h", "sliding-window 4/1h"),
        ("sliding-window 3/1h", "sliding-window 4/2h"),
    ] {
        let (live, store) = store(old);
        let now = 5 * SEC;
        assert!(check(&store, "k", 2, now).allowed, "{old}");
        live.set(spec(new));
        let peek = check(&store, "k", 0, now);
        assert_eq!(peek.remaining, 2, "{old} -> {new}");
        assert_eq!(peek.limit, 4, "{old} -> {new}");
        assert!(check(&store, "k", 2, now).allowed, "{old} -> {new}");
        assert!(!check(&store, "k", 1, now).allowed, "{old} -> {new}");
        // A key first seen after the change has the whole new quota.
        assert_eq!(check(&store, "new", 0, now).remaining, 4, "{new}");
    }
}

#[test]
fn a_change_of_kind_charges_what_was_used() {
    for (old, new) in [
        ("gcra 3/1h", "fixed-window 4/1h"),
        ("fixed-window 3/1h", "sliding-log 4/1h"),
        ("sliding-log 3/1h", "sliding-window 4/1h"),
        ("sliding-window 3/1h", "leaky-bucket 1/1h queue 3"),
        ("leaky-bucket 1/1h queue 2", "gcra 4/1h"),
        (
            "token-bucket 3 refill 1/1h",
            "fixed-window 4/1h anchor first-request",
        ),
    ] {
        let (live, store) = store(old);
        assert!(check(&store, "k", 2, 0).allowed);
        live.set(spec(new));
        assert_eq!(check(&store, "k", 0, 0).remaining, 2, "{old} -> {new}");
    }
}

/// The leak of issue 21: 3 used of 3/1d, then 2/1d, then 3/1d gave one
/// more each cycle. The overshoot is kept, for every algorithm and across
/// kinds.
#[test]
fn shrinking_and_growing_back_grants_nothing() {
    let cycles: &[[&str; 2]] = &[
        ["gcra 3/1d", "gcra 2/1d"],
        ["token-bucket 3 refill 3/1d", "token-bucket 2 refill 3/1d"],
        ["leaky-bucket 1/1d queue 2", "leaky-bucket 1/1d queue 1"],
        ["fixed-window 3/1d", "fixed-window 2/1d"],
        [
            "fixed-window 3/1d anchor first-request",
            "fixed-window 2/1h anchor first-request",
        ],
        ["sliding-log 3/1d", "sliding-log 2/1d"],
        ["sliding-log 3/1d", "sliding-log 3/1h"],
        ["sliding-window 3/1d", "sliding-window 2/1d"],
        ["sliding-window 3/1d", "sliding-window 2/2d"],
        ["gcra 3/1d", "fixed-window 2/1d"],
        ["sliding-log 3/1d", "gcra 1/1d"],
    ];
    for [big, small] in cycles {
        let (live, store) = store(big);
        let mut now = 0;
        assert!(check(&store, "k", 3, now).allowed, "{big}");
        for cycle in 0..20 {
            now += 60 * SEC;
            live.set(spec(small));
            assert!(
                !check(&store, "k", 1, now).allowed,
                "{small}, cycle {cycle}"
            );
            live.set(spec(big));
            let d = check(&store, "k", 1, now);
            assert!(
                !d.allowed && d.remaining == 0,
                "{big}, cycle {cycle}: {d:?}"
            );
        }
    }
}

#[test]
fn an_overshoot_drains_at_the_new_rate() {
    // 4 used of gcra 4/4h (T = 1 h), then 2/2h (T = 1 h, burst 2): 2
    // over; one fits again once 3 have drained, at 3 h.
    let (live, store) = store("gcra 4/4h");
    assert!(check(&store, "k", 4, 0).allowed);
    live.set(spec("gcra 2/2h"));
    let d = check(&store, "k", 1, 0);
    assert_eq!(d.wait, Some(Duration::from_secs(3 * 3600)), "{d:?}");
    assert!(!check(&store, "k", 1, 3 * 3600 * SEC - 1).allowed);
    assert!(check(&store, "k", 1, 3 * 3600 * SEC).allowed);
    // A sliding log over its new limit: free once enough entries expire.
    let (live, log) = self::store("sliding-log 3/1h");
    for i in 0..3 {
        assert!(check(&log, "k", 1, i * SEC).allowed);
    }
    live.set(spec("sliding-log 1/1h"));
    let d = check(&log, "k", 1, 10 * SEC);
    assert_eq!(d.wait, Some(Duration::from_secs(3600 + 2 - 10)), "{d:?}");
    assert_eq!((d.remaining, d.next), (0, Duration::from_secs(3592)));
}

#[test]
fn equal_settings_make_no_version() {
    let (live, store) = store("sliding-log 3/1h");
    live.set_override("vip", spec("sliding-log 9/1h")).unwrap();
    let (v, _) = live.algorithm_for("k");
    assert!(check(&store, "k", 3, 0).allowed);
    for _ in 0..100 {
        live.set(spec("sliding-log 3/1h"));
        live.set_override("vip", spec("sliding-log 9/1h")).unwrap();
        live.replace::<str>(
            spec("sliding-log 3/1h"),
            &[("vip", spec("sliding-log 9/1h"))],
        )
        .unwrap();
        assert!(!live.remove_override("nobody"));
    }
    assert_eq!(live.algorithm_for("k").0, v, "no new version");
    assert!(!check(&store, "k", 1, 0).allowed);
}

#[test]
fn a_smaller_limit_keeps_the_client_over_it() {
    for (old, new) in [
        ("gcra 5/1h", "gcra 2/1h"),
        ("leaky-bucket 1/1h queue 4", "leaky-bucket 1/1h queue 1"),
        ("fixed-window 5/1h", "fixed-window 2/1h"),
        ("sliding-log 5/1h", "sliding-log 2/1h"),
        ("sliding-window 5/1h", "sliding-window 2/1h"),
        ("sliding-window 5/1h", "sliding-window 2/30m"),
    ] {
        let (live, store) = store(old);
        assert!(check(&store, "k", 4, 0).allowed);
        live.set(spec(new));
        let d = check(&store, "k", 1, 0);
        assert!(!d.allowed && d.remaining == 0, "{old} -> {new}: {d:?}");
    }
}

#[test]
fn the_new_rate_refills_from_the_change_on() {
    // 2 of 2 used at 0 under 2/1s (T = 0.5 s); at 0.5 s one is back, and
    // the rate becomes 2/2s (T = 1 s): 1 used of 2, refilled at T = 1 s.
    let (live, store) = store("gcra 2/1s");
    assert!(check(&store, "k", 2, 0).allowed);
    live.set(spec("gcra 2/2s"));
    assert!(check(&store, "k", 1, SEC / 2).allowed);
    let d = check(&store, "k", 1, SEC / 2);
    assert_eq!(d.wait, Some(Duration::from_secs(1)));
    assert!(!check(&store, "k", 1, SEC / 2 + SEC - 1).allowed);
    assert!(check(&store, "k", 1, SEC / 2 + SEC).allowed);
}

#[test]
fn overrides_come_and_go_and_are_bounded() {
    let (live, store) = store("gcra 2/1h");
    live.set_override("vip", spec("gcra 20/1h")).unwrap();
    assert_eq!(live.overrides(), 1);
    assert_eq!(
        live.override_of("vip"),
        Some(live.override_of("vip").unwrap())
    );
    assert!(check(&store, "vip", 5, 0).allowed);
    assert_eq!(check(&store, "vip", 0, 0).remaining, 15);
    assert_eq!(check(&store, "other", 0, 0).remaining, 2);
    // The default changes; the override stays.
    live.set(spec("gcra 3/1h"));
    assert_eq!(check(&store, "vip", 0, 0).remaining, 15);
    assert_eq!(check(&store, "other", 0, 0).remaining, 3);
    // Removed: 5 used of the default's 3.
    assert!(live.remove_override("vip"));
    assert!(!live.remove_override("vip"));
    let d = check(&store, "vip", 1, 0);
    assert!(!d.allowed && d.limit == 3, "{d:?}");
    // At most MAX_OVERRIDES; replacing one is always allowed.
    for i in 0..MAX_OVERRIDES {
        live.set_override(&format!("k{i}"), spec("gcra 9/1h"))
            .unwrap();
    }
    assert_eq!(
        live.set_override("one-more", spec("gcra 9/1h")),
        Err(LiveError::TooManyOverrides { max: MAX_OVERRIDES })
    );
    live.set_override("k0", spec("gcra 8/1h")).unwrap();
    assert_eq!(live.overrides(), MAX_OVERRIDES);
    // A reload replaces everything at once.
    live.replace::<str>(spec("gcra 1/1h"), &[("vip", spec("gcra 7/1h"))])
        .unwrap();
    assert_eq!(live.overrides(), 1);
    assert_eq!(check(&store, "fresh", 0, 0).remaining, 1);
}

#[test]
fn a_denied_key_is_admitted_as_soon_as_the_limit_grows() {
    // The store's deny cache would answer from memory; it is off for a
    // live algorithm.
    let (live, store) = store("gcra 1/1h");
    assert!(check(&store, "k", 1, 0).allowed);
    for _ in 0..3 {
        assert!(!check(&store, "k", 1, 0).allowed);
    }
    live.set(spec("gcra 2/1h"));
    assert!(check(&store, "k", 1, 0).allowed);
}

/// No history to run out of: a key untouched through any number of
/// changes carries over from the settings it was written under.
#[test]
fn a_key_untouched_through_many_changes_keeps_what_it_used() {
    for (a, b) in [
        ("gcra 3/1h", "gcra 4/1h"),
        ("fixed-window 3/1h", "sliding-window 5/1h"),
        ("sliding-log 3/1h", "sliding-log 4/2h"),
    ] {
        let (live, store) = store(a);
        assert!(check(&store, "k", 3, 0).allowed);
        for i in 0..1000 {
            live.set(spec(if i % 2 == 0 { b } else { a }));
        }
        assert_eq!(check(&store, "k", 0, 0).remaining, 0, "{a} / {b}");
    }
}

/// 64 threads hammer one key at one instant while the limit goes from 10
/// per hour to 20 per two hours: exactly 20 are admitted in all (the 10
/// used carry over as 10 of 20), and every decision is wholly the old
/// settings' or the new's.
#[test]
fn a_live_swap_under_64_threads_is_exact_and_never_torn() {
    for round in 0..20 {
        let (live, store) = store("gcra 10/1h");
        let store = Arc::new(store);
        let admitted = Arc::new(AtomicU64::new(0));
        let swapped = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(65));
        let old = (10, Duration::from_secs(3600));
        let new = (20, Duration::from_secs(7200));
        let threads: Vec<_> = (0..64)
            .map(|_| {
                let (store, admitted, swapped, barrier) = (
                    Arc::clone(&store),
                    Arc::clone(&admitted),
                    Arc::clone(&swapped),
                    Arc::clone(&barrier),
                );
                std::thread::spawn(move || {
                    barrier.wait();
                    loop {
                        let after = swapped.load(Ordering::Acquire);
                        let d = store.check("shared", 1, 0).value().unwrap();
                        let seen = (d.limit, d.window);
                        assert!(seen == old || seen == new, "torn: {d:?}");
                        assert!(d.remaining < d.limit, "{d:?}");
                        if d.allowed {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        } else if after {
                            break;
                        }
                    }
                })
            })
            .collect();
        barrier.wait();
        for _ in 0..round * 50 {
            std::hint::spin_loop();
        }
        live.set(spec("gcra 20/2h"));
        swapped.store(true, Ordering::Release);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::Relaxed), 20, "round {round}");
    }
}

#[test]
fn a_live_state_is_56_bytes() {
    assert_eq!(
        std::mem::size_of::<ratelimit_core::algorithm::LiveState>(),
        56
    );
}

#[test]
fn algorithm_for_reads_the_version_and_the_key_s_settings_together() {
    let (live, _store) = store("gcra 3/1h");
    let (v0, a) = live.algorithm_for("k");
    assert_eq!(a.to_string(), "gcra 3/1h");
    live.set_override("k", spec("fixed-window 9/1m")).unwrap();
    let (v1, a) = live.algorithm_for("k");
    assert_eq!(a.to_string(), "fixed-window 9/1m");
    assert_ne!(v0, v1);
    let (v2, other) = live.algorithm_for("other");
    assert_eq!((v2, other.to_string()), (v1, "gcra 3/1h".to_owned()));
}

/// A key over its limit after a change, evicted at the cap, comes back
/// with its overshoot: eviction does not cap it at the limit either.
#[test]
fn an_evicted_overshoot_comes_back_whole() {
    const DAY: u64 = 86_400 * SEC;
    let live = LiveAlgorithm::new(spec("gcra 3/1d"));
    let store = MemoryStore::<LiveAlgorithm, String>::builder(live.clone())
        .shards(1)
        .max_keys(Some(1))
        .build()
        .unwrap();
    assert!(check(&store, "k", 3, 0).allowed);
    // 3 used of a burst of 1, draining one a day.
    live.set(spec("gcra 1/1d"));
    assert!(check(&store, "flood", 1, 0).allowed, "k is evicted");
    // Back at 2.5 d: restored with its 3 used, not capped at the new
    // burst of 1, so refused, as it would be if never evicted, until its
    // state would have been full (3 d: 3 used, one a day). A refused new
    // key takes no room: each check reads the sketch again.
    let back = 5 * DAY / 2;
    assert!(!check(&store, "k", 1, back).allowed);
    assert!(!check(&store, "k", 1, 3 * DAY - 1).allowed);
    assert!(check(&store, "k", 1, 3 * DAY).allowed);
}
