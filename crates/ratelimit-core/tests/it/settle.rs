//! Reserve, then settle: each algorithm on a manual clock in a memory
//! store, a settlement into debt denying the next check with the debt's
//! wait (also through the deny cache), settling down refunding, bans left
//! alone, a counter model (the sum charged is the sum used), and 64
//! threads settling into one key without a lost update.

use crate::now::Now;
use proptest::prelude::*;
use ratelimit_core::{
    Answer, AnyAlgorithm, BanPolicy, Clock, Decision, Gcra, ManualClock, MemoryStore, Store,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn store(spec: &str) -> MemoryStore<AnyAlgorithm, String> {
    MemoryStore::new(spec.parse::<AnyAlgorithm>().unwrap())
}

fn check(s: &MemoryStore<AnyAlgorithm, String>, cost: u64, now: u64) -> Decision {
    s.check("key", cost, now).value().unwrap()
}

/// The settlement of a request of `reserved` at `at` to `actual` at `now`,
/// through the [`Store`] trait's sync twin.
fn settle(
    s: &MemoryStore<AnyAlgorithm, String>,
    reserved: u64,
    actual: u64,
    at: u64,
    now: u64,
) -> Decision {
    Store::settle(s, &"key".to_owned(), reserved, actual, at, now)
        .into_ready()
        .ok()
        .unwrap()
        .unwrap()
}

/// After a settlement into debt at `now`, the next cost-1 check is denied
/// with a `retry_after`, still denied a nanosecond before it ends, and
/// admitted when it ends. Returns the `retry_after`.
fn denied_until_repaid(s: &MemoryStore<AnyAlgorithm, String>, now: u64) -> Duration {
    let d = check(s, 1, now);
    assert!(!d.allowed, "{d:?}");
    let wait = d.retry_after().expect("a debt is repaid");
    // The deny cache answers the same.
    assert_eq!(check(s, 1, now), d);
    let ns = u64::try_from(wait.as_nanos()).unwrap();
    assert!(!check(s, 1, now + ns - 1).allowed);
    assert!(check(s, 1, now + ns).allowed);
    wait
}

#[test]
fn gcra_and_token_bucket_owe_what_settles_past_the_burst() {
    for spec in ["gcra 10/1s", "token-bucket 10 refill 10/1s"] {
        let clock = ManualClock::new();
        let s = store(spec);
        let t0 = clock.now();
        assert!(check(&s, 1, t0).allowed);
        clock.advance(Duration::from_millis(5));
        // 15 used of 10: 5 owed, 500 ms of refill.
        let d = settle(&s, 1, 15, t0, clock.now());
        assert!(!d.allowed, "{spec}: {d:?}");
        assert_eq!(d.wait, Some(Duration::from_millis(495)), "{spec}");
        assert_eq!(d.next, Duration::from_millis(595), "{spec}");
        assert_eq!(d.reset, Duration::from_millis(1495), "{spec}");
        // The debt, then one request's worth.
        let wait = denied_until_repaid(&s, clock.now());
        assert_eq!(wait, Duration::from_millis(595), "{spec}");
    }
}

#[test]
fn a_fixed_window_forgets_its_debt_when_the_window_ends() {
    let s = store("fixed-window 10/1s");
    assert!(check(&s, 4, 0).allowed);
    let d = settle(&s, 4, 25, 0, 300 * MS);
    assert!(!d.allowed && d.remaining == 0, "{d:?}");
    assert_eq!(d.wait, Some(Duration::from_millis(700)));
    assert_eq!(
        denied_until_repaid(&s, 300 * MS),
        Duration::from_millis(700)
    );
    // The next window starts from nothing: 9 more fit after that one.
    assert_eq!(check(&s, 0, 1000 * MS).remaining, 9);
}

#[test]
fn a_sliding_window_debt_ages_out_as_it_slides() {
    let s = store("sliding-window 10/1s");
    assert!(check(&s, 1, 0).allowed);
    let d = settle(&s, 1, 20, 0, 0);
    assert!(!d.allowed, "{d:?}");
    // 20 in this window: denied until 20 * (1 - e) + 1 <= 10 in the next,
    // e = 0.55: 1.55 s.
    assert_eq!(denied_until_repaid(&s, 0), Duration::from_millis(1550));
}

#[test]
fn a_sliding_log_debt_ages_out_with_its_entries() {
    let s = store("sliding-log 10/1s");
    assert!(check(&s, 2, 0).allowed);
    assert!(check(&s, 1, 100 * MS).allowed);
    // 2 at 0, then 1 settled to 12 at 200 ms: 14 logged.
    let d = settle(&s, 1, 12, 100 * MS, 200 * MS);
    assert!(!d.allowed, "{d:?}");
    // 4 to repay: the 11 charged at 200 ms must age out, 1 s on.
    assert_eq!(d.wait, Some(Duration::from_millis(1000)));
    assert_eq!(
        denied_until_repaid(&s, 200 * MS),
        Duration::from_millis(1000)
    );
}

#[test]
fn a_sliding_log_stays_within_its_limit_of_entries_in_debt() {
    let s = store("sliding-log 3/1s");
    for i in 0..100 {
        settle(&s, 0, 1, i * MS, i * MS);
    }
    // 1 at 0 ms and at 1 ms, then merged into the newest entry, moved to
    // the settlement that reached the cap (2 * L = 6) at 5 ms; nothing
    // more is charged after it.
    let d = check(&s, 0, 99 * MS);
    assert_eq!(d.reset, Duration::from_millis(906));
    assert!(!check(&s, 1, 1005 * MS - 1).allowed);
    assert!(check(&s, 1, 1005 * MS).allowed);
}

#[test]
fn a_leaky_bucket_takes_no_debt_and_fills_its_queue() {
    let s = store("leaky-bucket 10/1s queue 4");
    assert!(check(&s, 1, 0).allowed);
    let d = settle(&s, 1, 50, 0, 0);
    // Filled to the top, never past it.
    assert!(d.allowed && d.remaining == 0, "{d:?}");
    assert_eq!(denied_until_repaid(&s, 0), Duration::from_millis(100));
}

#[test]
fn a_key_owes_at_most_its_capacity() {
    for (spec, wait) in [
        // 10 owed and one more: 1.1 s.
        ("gcra 10/1s", 1100),
        ("token-bucket 10 refill 10/1s", 1100),
        ("fixed-window 10/1s", 1000),
        ("sliding-window 10/1s", 1550),
        ("sliding-log 10/1s", 1000),
    ] {
        let s = store(spec);
        assert!(!settle(&s, 0, u64::MAX, 0, 0).allowed, "{spec}");
        assert!(!settle(&s, 0, 7, 0, 0).allowed, "{spec}");
        let d = check(&s, 1, 0);
        assert_eq!(d.retry_after(), Some(Duration::from_millis(wait)), "{spec}");
    }
}

#[test]
fn settling_down_refunds_and_equal_changes_nothing() {
    for spec in [
        "gcra 10/1s",
        "token-bucket 10 refill 10/1s",
        "fixed-window 10/1s",
        "sliding-window 10/1s",
        "sliding-log 10/1s",
        "leaky-bucket 10/1s queue 9",
    ] {
        let s = store(spec);
        assert!(check(&s, 8, 0).allowed, "{spec}");
        assert_eq!(settle(&s, 8, 8, 0, 0).remaining, 2, "{spec}");
        let d = settle(&s, 8, 3, 0, 0);
        assert!(d.allowed, "{spec}");
        assert_eq!(d.remaining, 7, "{spec}");
        assert_eq!(check(&s, 0, 0).remaining, 7, "{spec}");
        if !spec.starts_with("leaky") {
            // Into debt, then a settlement down that leaves some owed.
            assert!(check(&s, 7, 0).allowed, "{spec}");
            assert!(!settle(&s, 7, 12, 0, 0).allowed, "{spec}");
            let d = settle(&s, 7, 5, 0, 0);
            assert!(!d.allowed && d.remaining == 0, "{spec}: {d:?}");
        }
    }
}

#[test]
fn a_settlement_forgets_a_remembered_denial() {
    let s = store("gcra 10/1s");
    assert!(check(&s, 10, 0).allowed);
    let first = check(&s, 1, 0);
    assert_eq!(first.retry_after(), Some(Duration::from_millis(100)));
    // Remembered; a settlement up must not leave the shorter wait.
    settle(&s, 1, 3, 0, 0);
    let d = check(&s, 1, 0);
    assert_eq!(d.retry_after(), Some(Duration::from_millis(300)));
    assert_eq!(check(&s, 1, 0), d);
}

#[test]
fn a_key_not_held_settles_into_debt_and_is_kept() {
    let s = store("gcra 10/1s");
    let d = settle(&s, 0, 12, 0, 0);
    assert!(!d.allowed);
    assert_eq!(s.len(), 1);
    assert_eq!(denied_until_repaid(&s, 0), Duration::from_millis(300));
}

#[test]
fn a_ban_stands_through_a_settlement() {
    let s = MemoryStore::<_, String>::builder("fixed-window 2/1h".parse::<AnyAlgorithm>().unwrap())
        .ban(Some(BanPolicy::new(Duration::from_secs(60)).unwrap()))
        .build()
        .unwrap();
    assert!(check(&s, 2, 0).allowed);
    assert!(check(&s, 1, 0).banned);
    settle(&s, 2, 0, 0, MS);
    let d = check(&s, 1, MS);
    assert!(d.banned && !d.allowed, "{d:?}");
    assert_eq!(
        s.ban_left("key", MS).now().unwrap(),
        Some(Duration::from_secs(60) - Duration::from_millis(1))
    );
}

#[test]
fn the_default_settle_refunds_down_and_refuses_up() {
    /// A store that only checks and refunds (through a memory store).
    struct Plain(MemoryStore<Gcra, u64>);
    impl Store<u64> for Plain {
        type CheckFuture = std::future::Ready<Result<Decision, ratelimit_core::StoreError>>;
        type WriteFuture = std::future::Ready<Result<(), ratelimit_core::StoreError>>;
        fn check(
            &self,
            key: &u64,
            cost: u64,
            now: u64,
        ) -> Answer<Result<Decision, ratelimit_core::StoreError>, Self::CheckFuture> {
            Answer::pending(std::future::ready(self.0.check(key, cost, now).value()))
        }
        fn refund(
            &self,
            key: &u64,
            cost: u64,
            at: u64,
            now: u64,
        ) -> Answer<Result<(), ratelimit_core::StoreError>, Self::WriteFuture> {
            self.0.refund(key, cost, at, now).value().unwrap();
            Answer::pending(std::future::ready(Ok(())))
        }
    }
    impl ratelimit_core::store::Upkeep for Plain {}
    let s = Plain(MemoryStore::new(
        Gcra::new(10, Duration::from_secs(1)).unwrap(),
    ));
    assert!(s.0.check(&1, 6, 0).value().unwrap().allowed);
    let d = block_on(s.settle(&1, 6, 2, 0, 0)).unwrap();
    assert_eq!(d.remaining, 8);
    let err = block_on(s.settle(&1, 2, 5, 0, 0)).unwrap_err();
    assert_eq!(err.kind(), "unsupported", "{err}");
    assert_eq!(s.0.check(&1, 0, 0).value().unwrap().remaining, 8);
}

/// Polls a future that is ready at once.
fn block_on<F: std::future::IntoFuture>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f.into_future());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::future::Future::poll(f.as_mut(), &mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("not ready"),
    }
}

/// Algorithms that count as `used <= L` at a frozen clock.
fn counter_spec() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("gcra 50/1h"),
        Just("token-bucket 50 refill 50/1h"),
        Just("fixed-window 50/1h"),
        Just("sliding-window 50/1h"),
        Just("sliding-log 50/1h"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// At a frozen clock every algorithm but the leaky bucket is a counter
    /// of `L = 50`: a reservation of `r` is admitted iff `used + r <= 50`,
    /// and its settlement makes `used` grow by what it actually used (up
    /// to `2 * L`: a key owes at most its limit).
    #[test]
    fn the_sum_charged_is_the_sum_used(
        spec in counter_spec(),
        requests in prop::collection::vec((1u64..20, 0u64..80), 1..40),
    ) {
        let s = store(spec);
        let now = 1_000 * MS;
        let mut used = 0u64;
        for (reserved, actual) in requests {
            let d = check(&s, reserved, now);
            prop_assert_eq!(d.allowed, used + reserved <= 50, "{} {:?}", spec, d);
            if !d.allowed {
                continue;
            }
            let after = settle(&s, reserved, actual, now, now);
            // A key owes at most its limit.
            used = (used + actual).min(100);
            prop_assert_eq!(after.allowed, used <= 50, "{} {:?}", spec, after);
            prop_assert_eq!(after.remaining, 50u64.saturating_sub(used));
            let next = check(&s, 1, now);
            prop_assert_eq!(next.allowed, used < 50);
            if used >= 50 {
                prop_assert_eq!(next.retry_after(), Some(repaid(spec, used)), "{}", spec);
            }
            if next.allowed {
                s.refund("key", 1, now, now).value().unwrap();
            }
        }
    }
}

/// When a cost-1 request fits again, at 1 s into the first hour, after
/// `used` (at least 50) charged then, for the counter specs.
fn repaid(spec: &str, used: u64) -> Duration {
    const HOUR: u64 = 3_600_000_000_000;
    match spec.split(' ').next() {
        // 72 s per request: the debt and one more request.
        Some("gcra" | "token-bucket") => Duration::from_secs(72 * (used - 50 + 1)),
        // The window's end.
        Some("fixed-window") => Duration::from_secs(3_599),
        // The one entry ages out.
        Some("sliding-log") => Duration::from_secs(3_600),
        // Into the next window, until used * (P - e) <= 49 * P.
        _ => Duration::from_nanos(HOUR - 1_000_000_000 + HOUR - 49 * HOUR / used),
    }
}

#[test]
fn sixty_four_threads_settle_into_one_key_without_a_lost_update() {
    // 1000 per second, T = 1 ms: the `reset` of a peek is `used` ms.
    let gcra = Gcra::with_burst(1_000, Duration::from_secs(1), 2_000).unwrap();
    let s = MemoryStore::<Gcra, u64>::new(gcra);
    let used = AtomicU64::new(0);
    let start = Barrier::new(64);
    let now = 5_000 * MS;
    std::thread::scope(|scope| {
        for thread in 0..64u64 {
            let (s, used, start) = (&s, &used, &start);
            scope.spawn(move || {
                start.wait();
                for i in 0..50u64 {
                    let reserved = 1 + (thread + i) % 3;
                    if s.check(&7, reserved, now).value().unwrap().allowed {
                        let actual = (thread * 7 + i * 3) % 5;
                        s.settle(&7, reserved, actual, now, now).now().unwrap();
                        used.fetch_add(actual, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let peek = s.check(&7, 0, now).value().unwrap();
    assert_eq!(peek.reset, Duration::from_millis(used.into_inner()));
}
