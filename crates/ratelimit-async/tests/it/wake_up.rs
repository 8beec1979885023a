//! The real timer's wake-up error of `Limiter::until_ready`, bounded
//! by twice tokio's own p99 lateness measured before and after, so that other
//! tests of the binary running beside it widen the bound, not break it.

use ratelimit_async::Limiter;
use ratelimit_core::{Gcra, MemoryStore};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn k() -> String {
    "k".to_string()
}

/// The nearest-rank percentile `p` of sorted `xs`.
fn percentile(xs: &[u64], p: usize) -> u64 {
    xs[(xs.len() * p).div_ceil(100) - 1]
}

/// The p99 lateness of tokio's own timer here and now: 128 sleeps of 5 ms
/// and a bit, one after another (about 0.8 s).
async fn timer_p99() -> u64 {
    let mut late = Vec::new();
    for i in 0..128u64 {
        let deadline = tokio::time::Instant::now() + Duration::from_micros(5_000 + i * 7);
        tokio::time::sleep_until(deadline).await;
        late.push(u64::try_from(deadline.elapsed().as_nanos()).unwrap());
    }
    late.sort_unstable();
    percentile(&late, 99)
}

/// The wake-up error of `until_ready` on the real timer: 256 concurrent
/// waiters on one key at 200 per second (burst 1, so each is admissible
/// exactly 5 ms after the one before, in the limiter's own clock); the
/// error is how much later than that it was admitted. Tokio's timer has a
/// resolution of 1 ms (a deadline is rounded up to the next millisecond
/// tick, and the driver parks from the current tick), so the error is
/// 1 ms or so by design, plus the scheduler's latency. About 2 s of real
/// time.
///
/// The bound is 2 ms plus twice tokio's own p99 lateness, measured before
/// and after (the larger); on a machine too busy to time even that (tokio's own timer 1.5 ms or
/// more late at p99) a miss is reported as SKIPPED and passes.
#[tokio::test]
async fn wake_up_error_is_within_two_ms_of_tokios_timer_at_p99() {
    const WAITERS: usize = 256;
    let timer = timer_p99().await;
    let limiter: Limiter<String, _> =
        Limiter::new(MemoryStore::new(Gcra::with_burst(200, SECOND, 1).unwrap()));
    let origin = limiter.now();
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.until_ready(&k(), 1).await.unwrap();
                limiter.now()
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
            // A reading is taken after the admission, so a waiter whose
            // task ran late makes the next one look early: that is the
            // reading's error, not the limiter's (that it never admits
            // early is tested on the paused clock, in `limiter.rs`).
            t.saturating_sub(ideal)
        })
        .collect();
    errors.sort_unstable();
    // Tokio's timer again, after: load that came during the run widens
    // the bound too.
    let timer = timer.max(timer_p99().await);
    let p99 = percentile(&errors, 99);
    let p50 = percentile(&errors, 50);
    eprintln!(
        "wake-up error of {WAITERS} waiters: p50 {p50} ns, p99 {p99} ns, max {} ns; \
         tokio's own timer: p99 {timer} ns",
        errors[WAITERS - 1]
    );
    // Tokio's own timer within half a millisecond of the target leaves
    // no room to time the limiter: say so, loudly, and pass (in CI too: a
    // busy machine must not fail a build).
    // The bound is 2 ms past the pace, plus twice tokio's own p99
    // lateness measured around it: the limiter adds little to the timer,
    // and a machine busy enough to delay the timer delays the waiters too.
    let bound = 2_000_000 + 2 * timer;
    if p99 >= bound && timer >= 1_500_000 {
        eprintln!(
            "SKIPPED: this machine is too busy to time 2 ms (tokio's own timer is \
             {timer} ns late at p99); the limiter's p99 was {p99} ns"
        );
        return;
    }
    assert!(
        p99 < bound,
        "p99 wake-up error {p99} ns, over {bound} (tokio's own timer: {timer} ns): {errors:?}"
    );
}
