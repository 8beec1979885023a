//! The real timer's wake-up error of `Limiter::until_ready`: alone in
//! its test binary, so that no other test's work (a redis-server starting,
//! say) runs beside the measurement.

use ratelimit_async::Limiter;
use ratelimit_core::{Gcra, MemoryStore};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn k() -> String {
    "k".to_string()
}

/// The wake-up error of `until_ready` on the real timer: 256 concurrent
/// waiters on one key at 200 per second (burst 1, so each is admissible
/// exactly 5 ms after the one before, in the limiter's own clock); the
/// error is how much later than that it was admitted. Tokio's timer has a
/// resolution of 1 ms (a deadline is rounded up to the next millisecond
/// tick, and the driver parks from the current tick), so the error is
/// 1 ms or so by design, plus the scheduler's latency. About 1.3 s of
/// real time.
#[tokio::test]
async fn wake_up_error_is_under_two_ms_at_p99_on_the_real_clock() {
    const WAITERS: usize = 256;
    let limiter: Limiter<String, _> =
        Limiter::new(MemoryStore::new(Gcra::with_burst(200, SECOND, 1).unwrap()));
    let clock = limiter.clock().clone();
    let origin = clock.now();
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.until_ready(&k(), 1).await.unwrap();
                limiter.clock().now()
            })
        })
        .collect();
    let mut at = Vec::new();
    for t in tasks {
        at.push(t.await.unwrap());
    }
    at.sort_unstable();
    let first = at[0];
    assert!(
        first - origin < 50_000_000,
        "the first waiter took {}",
        first - origin
    );
    let step = 5_000_000u64;
    let mut errors: Vec<u64> = at
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let ideal = if k == 0 { first } else { at[k - 1] + step };
            // Never early: the store admits no sooner than the pace.
            assert!(*t >= ideal, "waiter {k} admitted {} ns early", ideal - t);
            t - ideal
        })
        .collect();
    errors.sort_unstable();
    let p99 = errors[(errors.len() * 99).div_ceil(100) - 1];
    let p50 = errors[errors.len() / 2];
    eprintln!(
        "wake-up error of {WAITERS} waiters: p50 {p50} ns, p99 {p99} ns, max {} ns",
        errors[WAITERS - 1]
    );
    assert!(p99 < 2_000_000, "p99 wake-up error {p99} ns: {errors:?}");
}
