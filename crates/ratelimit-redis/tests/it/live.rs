//! `LiveRedis`: settings and overrides changed while the store runs, each
//! key's state carried over in Redis exactly as `LiveAlgorithm` carries it
//! in memory (compared decision by decision), across instances, under
//! concurrency, with the deny cache and leases.

use crate::harness::Rng;
use crate::server;
use ratelimit_core::{
    Algorithm, Anchor, AnyAlgorithm, Decision, LiveAlgorithm, MemoryStore, Store,
};
use ratelimit_redis::{LiveRedis, RedisStore, TimeSource};
use std::sync::Arc;
use std::time::Duration;

/// A real epoch time (2023-11-14), on no whole second.
pub(crate) const T0: u64 = 1_700_000_000_123_456_789;

pub(crate) fn spec(s: &str) -> AnyAlgorithm {
    s.parse().unwrap()
}

pub(crate) fn live_store(url: &str, prefix: &str, live: &LiveAlgorithm) -> LiveRedis {
    RedisStore::builder(url, live.get())
        .prefix(prefix)
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .build_live(live)
        .unwrap()
}

pub(crate) async fn check(store: &LiveRedis, key: &str, cost: u64, now: u64) -> Decision {
    store.store_for(key).check(key, cost, now).await.unwrap()
}

/// The pairs of settings the carry-over is checked on: within each kind
/// (up and down, other periods, anchors), and across kinds.
const PAIRS: &[(&str, &str)] = &[
    ("gcra 3/1h", "gcra 4/1h"),
    ("gcra 3/1h", "gcra 4/2h"),
    ("gcra 5/1h", "gcra 2/1h"),
    ("gcra 2/1s", "gcra 2/2s"),
    ("gcra 7/1s burst 5", "gcra 3/1s"),
    ("gcra 3/1h burst 3", "gcra 1/1h burst 4"),
    ("token-bucket 3 refill 1/1h", "token-bucket 4 refill 1/1h"),
    ("gcra 3/1h", "token-bucket 4 refill 4/1h"),
    ("token-bucket 3 refill 3/1m", "gcra 4/1d"),
    ("gcra 7/1s burst 5", "token-bucket 4 refill 3/1s"),
    ("leaky-bucket 1/1h queue 2", "leaky-bucket 1/1h queue 3"),
    ("leaky-bucket 1/1h queue 2", "leaky-bucket 2/1h queue 3"),
    ("leaky-bucket 1/1h queue 4", "leaky-bucket 1/1h queue 1"),
    ("leaky-bucket 3/1s queue 2", "leaky-bucket 5/2s queue 4"),
    ("fixed-window 3/1h", "fixed-window 4/1h"),
    ("fixed-window 3/1h", "fixed-window 4/2h"),
    ("fixed-window 5/1h", "fixed-window 2/1h"),
    (
        "fixed-window 3/1h anchor first-request",
        "fixed-window 4/2h anchor first-request",
    ),
    (
        "fixed-window 3/1h anchor key-offset",
        "fixed-window 4/1h anchor key-offset",
    ),
    (
        "fixed-window 3/1s",
        "fixed-window 5/700ms anchor first-request",
    ),
    (
        "fixed-window 3/1s anchor key-offset",
        "fixed-window 2/300ms",
    ),
    ("sliding-log 3/1h", "sliding-log 4/1h"),
    ("sliding-log 3/1h", "sliding-log 4/2h"),
    ("sliding-log 5/1h", "sliding-log 2/1h"),
    ("sliding-log 5/1s", "sliding-log 3/2s"),
    ("sliding-window 3/1h", "sliding-window 4/1h"),
    ("sliding-window 3/1h", "sliding-window 4/2h"),
    ("sliding-window 5/1h", "sliding-window 2/30m"),
    ("sliding-window 5/1s", "sliding-window 8/1s"),
    ("sliding-window 5/1s", "sliding-window 3/700ms"),
    ("gcra 999983/1h burst 3", "gcra 7/13s burst 5"),
    ("token-bucket 5 refill 3/7s", "gcra 1000003/1d burst 9"),
    (
        "leaky-bucket 999983/1h queue 3",
        "leaky-bucket 7/13s queue 2",
    ),
    ("sliding-window 7/13s", "sliding-window 999983/1h"),
    ("sliding-log 4/2h", "sliding-log 2/30m"),
    (
        "fixed-window 3/2h anchor first-request",
        "fixed-window 1/10m anchor first-request",
    ),
    ("gcra 3/1h", "sliding-log 1/1h"),
    ("fixed-window 4/1h", "leaky-bucket 1/1h queue 0"),
    ("sliding-log 2/1s", "fixed-window 5/1s anchor first-request"),
    ("sliding-window 4/1h", "token-bucket 1 refill 1/1h"),
    // Calendar weeks and months (a week is not an aligned 7d).
    ("fixed-window 3/7d", "fixed-window 4/week"),
    ("fixed-window 3/week", "fixed-window 5/month"),
    (
        "fixed-window 3/month",
        "fixed-window 2/1d anchor first-request",
    ),
    ("gcra 3/1h", "fixed-window 4/month"),
    ("gcra 3/1h", "fixed-window 4/1h"),
    ("fixed-window 3/1h", "sliding-log 4/1h"),
    ("sliding-log 3/1h", "sliding-window 4/1h"),
    ("leaky-bucket 1/1h queue 2", "gcra 4/1h"),
    ("sliding-window 3/1s", "leaky-bucket 2/1s queue 1"),
];

#[tokio::test]
async fn two_used_of_a_new_four_leaves_two_in_redis() {
    let server = server!();
    for (i, (old, new)) in PAIRS[..PAIRS.len() - 5]
        .iter()
        .filter(|(_, new)| spec(new).limit() == 4)
        .enumerate()
    {
        let live = LiveAlgorithm::new(spec(old));
        let store = live_store(&server.url(), &format!("two{i}:"), &live);
        assert!(check(&store, "k", 2, T0).await.allowed, "{old}");
        live.set(spec(new));
        let peek = check(&store, "k", 0, T0).await;
        assert_eq!((peek.remaining, peek.limit), (2, 4), "{old} -> {new}");
        assert!(check(&store, "k", 2, T0).await.allowed, "{old} -> {new}");
        assert!(!check(&store, "k", 1, T0).await.allowed, "{old} -> {new}");
        assert_eq!(check(&store, "new", 0, T0).await.remaining, 4, "{new}");
    }
}

#[tokio::test]
async fn a_change_of_kind_charges_what_was_used_in_redis_back_and_forth() {
    let server = server!();
    for (i, (old, new)) in PAIRS[PAIRS.len() - 5..].iter().enumerate() {
        let live = LiveAlgorithm::new(spec(old));
        let store = live_store(&server.url(), &format!("kind{i}:"), &live);
        assert!(check(&store, "k", 2, T0).await.allowed);
        // Over and back: the 2 used are charged under each kind in turn.
        for (from, to) in [(old, new), (new, old)] {
            live.set(spec(to));
            let remaining = check(&store, "k", 0, T0).await.remaining;
            assert_eq!(remaining, spec(to).limit() - 2, "{from} -> {to}");
        }
    }
}

/// Memory and Redis follow one `LiveAlgorithm` through random checks,
/// refunds, changes of the settings and an override coming and going:
/// every decision is the same, field for field.
#[tokio::test]
async fn carry_over_in_redis_matches_memory_decision_by_decision() {
    let server = server!();
    let mut compared = 0;
    for (i, (old, new)) in PAIRS.iter().enumerate() {
        for seed in 0..3u64 {
            let (a, b) = (spec(old), spec(new));
            let live = LiveAlgorithm::new(a);
            let memory = MemoryStore::<LiveAlgorithm, String>::new(live.clone());
            let redis = live_store(&server.url(), &format!("diff{i}-{seed}:"), &live);
            let mut rng = Rng(0x11fe ^ (i as u64) << 16 ^ seed);
            let span = a.window().max(b.window()).as_nanos() as u64;
            let mut now = T0 + rng.below(span);
            let (mut on_new, mut overridden) = (false, false);
            // ratelimit-core reopens a first-request window refunded to a
            // count of 0, Redis keeps it (see exact.rs): no refunds there.
            let refunds = ![a, b].iter().any(
                |x| matches!(x, AnyAlgorithm::FixedWindow(w) if w.anchor() == Anchor::FirstRequest),
            );
            let mut last: Option<(String, u64, u64)> = None;
            for step in 0..160 {
                let what = rng.below(100);
                if what < 6 {
                    on_new = !on_new;
                    live.set(if on_new { b } else { a });
                    continue;
                }
                if what < 9 {
                    overridden = !overridden;
                    if overridden {
                        live.set_override("b", if on_new { a } else { b }).unwrap();
                    } else {
                        assert!(live.remove_override("b"));
                    }
                    continue;
                }
                now += match rng.below(3) {
                    0 => 0,
                    1 => rng.below(span / 8 + 1),
                    _ => rng.below(span / 2 + 1),
                };
                let key = if rng.chance(50) { "a" } else { "b" }.to_owned();
                let ctx = format!("{old} -> {new}, seed {seed}, step {step}, key {key}");
                if what < 20 && refunds {
                    if let Some((k, cost, at)) = last.take() {
                        memory.refund_now(&k, cost, at, now);
                        redis.store_for(&k).refund(&k, cost, at, now).await.unwrap();
                        continue;
                    }
                }
                let cost = rng.below(3);
                let m = memory.check_now(&key, cost, now).unwrap();
                let r = check(&redis, &key, cost, now).await;
                assert_eq!(r, m, "{ctx}");
                if m.allowed && cost > 0 {
                    last = Some((key, cost, now));
                }
                compared += 1;
            }
        }
    }
    assert!(compared > 10_000, "{compared}");
}

#[tokio::test]
async fn overrides_come_and_go_in_redis() {
    let server = server!();
    let live = LiveAlgorithm::new(spec("gcra 3/1h"));
    let store = live_store(&server.url(), "ov:", &live);
    live.set_override("vip", spec("gcra 30/1h")).unwrap();
    let mut admitted = 0;
    for _ in 0..40 {
        admitted += u32::from(check(&store, "vip", 1, T0).await.allowed);
    }
    assert_eq!(admitted, 30);
    assert_eq!(check(&store, "other", 0, T0).await.remaining, 3);
    // Removed: the key keeps what it used (30 of 3: none left).
    assert!(live.remove_override("vip"));
    let d = check(&store, "vip", 0, T0).await;
    assert_eq!((d.remaining, d.limit), (0, 3));
    // Given again, larger: what was used is kept whole (not capped at the
    // default's burst), as in memory: 30 used of 60.
    live.set_override("vip", spec("gcra 60/1h")).unwrap();
    assert_eq!(check(&store, "vip", 0, T0).await.remaining, 30);
    // An override of another kind is charged what was used (30 of 5:
    // none left); overrides are bounded in number.
    live.set_override("vip", spec("fixed-window 5/1h")).unwrap();
    assert_eq!(check(&store, "vip", 0, T0).await.remaining, 0);
    for i in 1..ratelimit_core::MAX_OVERRIDES {
        live.set_override(&format!("c{i}"), spec("gcra 9/1h"))
            .unwrap();
    }
    assert!(live
        .set_override("one-too-many", spec("gcra 9/1h"))
        .is_err());
    assert_eq!(check(&store, "c7", 0, T0).await.remaining, 9);
    assert_eq!(check(&store, "one-too-many", 0, T0).await.remaining, 3);
}

/// Two instances, each following its own copy of the settings (each
/// reloads its own file), on one Redis: a change on one carries the
/// shared state over; the other keeps its settings until it reloads too.
#[tokio::test]
async fn two_instances_reload_their_own_settings_on_one_redis() {
    let server = server!();
    let (live_a, live_b) = (
        LiveAlgorithm::new(spec("gcra 2/1h")),
        LiveAlgorithm::new(spec("gcra 2/1h")),
    );
    let a = live_store(&server.url(), "fleet:", &live_a);
    let b = live_store(&server.url(), "fleet:", &live_b);
    assert!(check(&a, "k", 1, T0).await.allowed);
    assert!(check(&b, "k", 1, T0).await.allowed);
    assert!(!check(&b, "k", 1, T0).await.allowed);
    // A reloads: 2 used of a new 4 leaves 2, on A.
    live_a.set(spec("gcra 4/1h"));
    assert_eq!(check(&a, "k", 0, T0).await.remaining, 2);
    // B has not: under its 2/1h, the 2 used leave nothing.
    let d = check(&b, "k", 1, T0).await;
    assert!(!d.allowed && d.limit == 2, "{d:?}");
    // B reloads: both agree.
    live_b.set(spec("gcra 4/1h"));
    assert!(check(&b, "k", 1, T0).await.allowed);
    assert!(check(&a, "k", 1, T0).await.allowed);
    assert!(!check(&b, "k", 1, T0).await.allowed);
    assert!(!check(&a, "k", 1, T0).await.allowed);
    // Through StoreSettings (what the policy table builds), too.
    let settings = crate::any_store::settings(&server, "app:");
    let live = LiveAlgorithm::new(spec("fixed-window 2/1d"));
    let x = settings.build::<String>("login", &live, None).unwrap();
    let y = settings.build::<String>("login", &live_b, None).unwrap();
    assert!(x.check(&"k".to_owned(), 2, 0).await.unwrap().allowed);
    live.set(spec("fixed-window 3/1d"));
    assert_eq!(x.check(&"k".to_owned(), 0, 0).await.unwrap().remaining, 1);
    // Another kind on another instance's settings: that instance charges
    // what the other kind's state had used (2 of its 4).
    assert_eq!(y.check(&"k".to_owned(), 0, 0).await.unwrap().remaining, 2);
}

/// 64 clients check one key while its limit grows: exactly the new limit
/// is admitted in all, whenever the change lands among the checks, and
/// every decision is under one setting or the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_swap_under_64_clients_is_exact_in_redis() {
    let server = server!();
    for (round, (old, new)) in [
        ("gcra 100/1h", "gcra 250/1h"),
        ("fixed-window 100/1h", "fixed-window 250/1h"),
        ("sliding-log 100/1h", "sliding-log 250/1h"),
        ("sliding-window 100/1h", "sliding-window 250/1h"),
        ("leaky-bucket 1/1h queue 99", "leaky-bucket 1/1h queue 249"),
    ]
    .into_iter()
    .enumerate()
    {
        let live = LiveAlgorithm::new(spec(old));
        let store = Arc::new(live_store(&server.url(), &format!("swap{round}:"), &live));
        let run = |n: usize| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut admitted = 0u64;
                for _ in 0..n {
                    let d = check(&store, "hot", 1, T0).await;
                    assert!(d.limit == 100 || d.limit == 250, "{d:?}");
                    admitted += u64::from(d.allowed);
                }
                admitted
            })
        };
        let first: Vec<_> = (0..64).map(|_| run(3)).collect();
        // The change lands among the first checks.
        tokio::task::yield_now().await;
        live.set(spec(new));
        let mut total = 0;
        for t in first {
            total += t.await.unwrap();
        }
        let second: Vec<_> = (0..64).map(|_| run(3)).collect();
        for t in second {
            total += t.await.unwrap();
        }
        assert_eq!(total, 250, "{old} -> {new}");
    }
}

/// A denial cached under the old settings is not served after a change,
/// and a lease taken under them is given back and never spent after it.
#[tokio::test]
async fn deny_cache_and_leases_do_not_outlive_a_change() {
    let server = server!();
    let live = LiveAlgorithm::new(spec("gcra 2/1h"));
    let store = RedisStore::builder(server.url(), live.get())
        .prefix("dc:")
        .time_source(TimeSource::Caller)
        .timeout(Duration::from_secs(5))
        .lease(3, Duration::from_secs(60))
        .build_live(&live)
        .unwrap();
    // Denied at 2 of 2: the denial is cached (answered without Redis).
    assert!(check(&store, "d", 2, T0).await.allowed);
    assert!(!check(&store, "d", 1, T0).await.allowed);
    let cached = store.store_for("d").check("d", 1, T0);
    assert!(!cached.await.unwrap().allowed);
    live.set(spec("gcra 3/1h"));
    let d = check(&store, "d", 1, T0).await;
    assert!(d.allowed && d.remaining == 0, "{d:?}");

    // A hot key takes a lease of 3 under 10/1h: 3 units counted in Redis.
    live.set(spec("gcra 10/1h"));
    assert!(check(&store, "h", 1, T0).await.allowed);
    assert!(check(&store, "h", 1, T0).await.allowed); // takes 3, spends 1
                                                      // Used in Redis: 1 + 3 of 10; 2 of the lease unspent.
    live.set(spec("gcra 20/1h"));
    // The change gives the 2 back (in a task) and spends none of them: the
    // next check goes to Redis, under 20/1h.
    let mut remaining = 0;
    for _ in 0..100 {
        remaining = check(&store, "h", 0, T0).await.remaining;
        if remaining == 18 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(remaining, 18, "4 taken, 2 given back: 2 used of 20");
}
