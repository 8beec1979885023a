//! Boundary cases, as plain tests through the store: exactly at `T`, at a
//! window's edge (`k*P` and `k*P - 1ns`), cost equal to the capacity, cost
//! above it (never, state unchanged) and cost 0 (a peek).

use ratelimit_core::algorithm::{stable_hash, Anchor};
use ratelimit_core::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, MemoryStore, SlidingLog, SlidingWindow, Store,
    TokenBucket,
};
use std::time::Duration;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// `(t, cost, allowed, remaining, wait_ns)`; `wait_ns` `None` is never.
type Row = (u64, u64, bool, u64, Option<u64>);

/// Runs `rows` for one key through a fresh store and checks every number.
fn expect<A: Algorithm>(algorithm: A, key: u64, rows: &[Row]) {
    let store = MemoryStore::<A, u64>::new(algorithm);
    for (i, &(t, cost, allowed, remaining, wait)) in rows.iter().enumerate() {
        let d = store.check(&key, cost, t).value().unwrap();
        let got = (
            t,
            cost,
            d.allowed,
            d.remaining,
            d.wait.map(|w| u64::try_from(w.as_nanos()).unwrap()),
        );
        assert_eq!(got, (t, cost, allowed, remaining, wait), "row {i}");
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn gcra_exactly_at_t_when_t_is_whole() {
    // 4 per 1s, burst 1: T = 250ms exactly.
    let gcra = Gcra::with_burst(4, secs(1), 1).unwrap();
    expect(
        gcra,
        0,
        &[
            (0, 1, true, 0, Some(0)),
            (250 * MS - 1, 1, false, 0, Some(1)),
            (250 * MS, 1, true, 0, Some(0)),
            (500 * MS, 1, true, 0, Some(0)),
        ],
    );
}

#[test]
fn gcra_exactly_at_t_when_t_is_a_fraction() {
    // 3 per 1s, burst 3: T = 333_333_333 1/3 ns.
    let gcra = Gcra::new(3, secs(1)).unwrap();
    expect(
        gcra,
        0,
        &[
            (0, 3, true, 0, Some(0)),
            // TAT = 1s; the next fits at TAT + T - B*T = T: 1/3 ns away.
            (333_333_333, 1, false, 0, Some(1)),
            (333_333_334, 1, true, 0, Some(0)),
            // TAT = 1s + T; at 2T = 666_666_666 2/3 there is room.
            (666_666_666, 1, false, 0, Some(1)),
            (666_666_667, 1, true, 0, Some(0)),
            // TAT = 1s + 2T; at 3T = 1s exactly: no drift.
            (S - 1, 1, false, 0, Some(1)),
            (S, 1, true, 0, Some(0)),
        ],
    );
    // Burst 1: a late request restarts the schedule from itself.
    let gcra = Gcra::with_burst(3, secs(1), 1).unwrap();
    expect(
        gcra,
        0,
        &[
            (0, 1, true, 0, Some(0)),
            (333_333_333, 1, false, 0, Some(1)),
            (333_333_334, 1, true, 0, Some(0)),
            // TAT = 333_333_334 + T = 666_666_667 1/3.
            (666_666_666, 1, false, 0, Some(2)),
            (666_666_667, 1, false, 0, Some(1)),
            (666_666_668, 1, true, 0, Some(0)),
        ],
    );
}

#[test]
fn gcra_never_drifts() {
    // L per P admits exactly L in every period, for as long as it runs,
    // whether or not P / L is a whole number of nanoseconds.
    for (limit, period) in [(3u64, S), (7, S), (999, S), (1_000_003, 7 * S)] {
        let gcra = Gcra::new(limit, Duration::from_nanos(period)).unwrap();
        let store = MemoryStore::<Gcra, u64>::new(gcra);
        let t_ns = u64::try_from((u128::from(period)).div_ceil(u128::from(limit))).unwrap();
        for k in 0..300u64 {
            let at = k * period;
            if k > 0 {
                // A whole period's worth fits a nanosecond later, not now.
                let early = store.check(&1, limit, at - 1).value().unwrap();
                assert!(!early.allowed, "{limit}/{period}: early in period {k}");
                assert_eq!(early.wait, Some(Duration::from_nanos(1)));
            }
            let all = store.check(&1, limit, at).value().unwrap();
            assert!(all.allowed, "{limit}/{period}: period {k}");
            assert_eq!(all.remaining, 0);
            let more = store.check(&1, 1, at).value().unwrap();
            assert!(!more.allowed);
            assert_eq!(more.wait, Some(Duration::from_nanos(t_ns)));
        }
    }
}

#[test]
fn gcra_cost_equal_and_above_capacity_and_zero() {
    // 5 per 1s (T = 200ms), burst 5.
    let gcra = Gcra::new(5, secs(1)).unwrap();
    expect(
        gcra,
        0,
        &[
            // Peek on a fresh key.
            (0, 0, true, 5, Some(0)),
            // Above the capacity: never, and nothing changes.
            (0, 6, false, 5, None),
            (0, u64::MAX, false, 5, None),
            // Exactly the capacity.
            (0, 5, true, 0, Some(0)),
            (0, 0, true, 0, Some(0)),
            (0, 1, false, 0, Some(200 * MS)),
            (0, 5, false, 0, Some(S)),
            (0, 6, false, 0, None),
            // Peeks changed nothing: one token back after T.
            (200 * MS, 0, true, 1, Some(0)),
            (200 * MS, 2, false, 1, Some(200 * MS)),
            (S, 5, true, 0, Some(0)),
        ],
    );
}

#[test]
fn token_bucket_is_gcra_with_burst() {
    let bucket = TokenBucket::new(5, 1, secs(2)).unwrap();
    expect(
        bucket,
        0,
        &[
            (0, 5, true, 0, Some(0)),
            (0, 1, false, 0, Some(2 * S)),
            (2 * S - 1, 1, false, 0, Some(1)),
            (2 * S, 1, true, 0, Some(0)),
            (2 * S, 6, false, 0, None),
            (2 * S, 0, true, 0, Some(0)),
            (12 * S, 0, true, 5, Some(0)),
        ],
    );
}

#[test]
fn leaky_bucket_holds_and_paces() {
    // 2 per 1s (T = 500ms), up to 1 waiting.
    let bucket = LeakyBucket::new(2, secs(1), 1).unwrap();
    expect(
        bucket,
        0,
        &[
            (0, 0, true, 2, Some(0)),
            (0, 1, true, 1, Some(0)),
            (0, 1, true, 0, Some(500 * MS)),
            // last = 1s, Q*T = 500ms: wait 500ms.
            (0, 1, false, 0, Some(500 * MS)),
            // Cost above Q + 1: never.
            (0, 3, false, 0, None),
            (0, 0, true, 0, Some(0)),
            (500 * MS - 1, 1, false, 0, Some(1)),
            (500 * MS, 1, true, 0, Some(500 * MS)),
            // Cost equal to Q + 1 once drained.
            (2 * S, 2, true, 0, Some(0)),
        ],
    );
    // Q = 0: a strict pacer, one per T, none held; 3 per 1s.
    let pacer = LeakyBucket::new(3, secs(1), 0).unwrap();
    expect(
        pacer,
        0,
        &[
            (0, 1, true, 0, Some(0)),
            (333_333_333, 1, false, 0, Some(1)),
            // Paced from the actual departure: d* = t - T, start = t.
            (333_333_334, 1, true, 0, Some(0)),
            (666_666_667, 1, false, 0, Some(1)),
            (666_666_668, 1, true, 0, Some(0)),
            (S, 2, false, 0, None),
        ],
    );
}

#[test]
fn fixed_window_edges_aligned() {
    let window = FixedWindow::new(3, secs(1)).unwrap();
    expect(
        window,
        0,
        &[
            (S - 2, 0, true, 3, Some(0)),
            (S - 2, 4, false, 3, None),
            (S - 2, 3, true, 0, Some(0)),
            (S - 1, 1, false, 0, Some(1)),
            (S - 1, 0, true, 0, Some(0)),
            // The next window opens exactly at k*P.
            (S, 3, true, 0, Some(0)),
            (S, 1, false, 0, Some(S)),
            (5 * S - 1, 1, true, 2, Some(0)),
            (5 * S, 1, true, 2, Some(0)),
        ],
    );
}

#[test]
fn fixed_window_edges_first_request() {
    let window = FixedWindow::new(3, secs(1))
        .unwrap()
        .with_anchor(Anchor::FirstRequest)
        .unwrap();
    expect(
        window,
        0,
        &[
            // A peek opens no window.
            (100, 0, true, 3, Some(0)),
            // The first admitted request opens [500ms, 1.5s).
            (500 * MS, 3, true, 0, Some(0)),
            (S, 1, false, 0, Some(500 * MS)),
            (1_500 * MS - 1, 1, false, 0, Some(1)),
            (1_500 * MS, 1, true, 2, Some(0)),
            // That opened [1.5s, 2.5s).
            (2_499 * MS, 2, true, 0, Some(0)),
            (2_499 * MS, 1, false, 0, Some(MS)),
            (2_500 * MS, 3, true, 0, Some(0)),
        ],
    );
}

#[test]
fn fixed_window_edges_key_offset() {
    let period = secs(1);
    let window = FixedWindow::new(2, period)
        .unwrap()
        .with_anchor(Anchor::KeyOffset)
        .unwrap();
    for key in 0..50u64 {
        let o = stable_hash(&key) % S;
        assert!(o > 0, "pick other keys");
        // Before the key's first edge (its first window started before 0).
        let mut rows = vec![
            (0, 2, true, 0, Some(0)),
            (0, 1, false, 0, Some(o)),
            (o - 1, 1, false, 0, Some(1)),
        ];
        rows.extend([
            (o, 2, true, 0, Some(0)),
            (o + S - 1, 1, false, 0, Some(1)),
            (o + S, 1, true, 1, Some(0)),
            (o + 3 * S - 1, 2, true, 0, Some(0)),
            (o + 3 * S - 1, 1, false, 0, Some(1)),
        ]);
        expect(window, key, &rows);
    }
}

#[test]
fn sliding_log_edges() {
    let log = SlidingLog::new(3, secs(1)).unwrap();
    expect(
        log,
        0,
        &[
            (0, 0, true, 3, Some(0)),
            (0, 2, true, 1, Some(0)),
            (10, 1, true, 0, Some(0)),
            (10, 4, false, 0, None),
            // Room for 2 once the entry at 0 leaves (at exactly 1s).
            (20, 2, false, 0, Some(S - 20)),
            // Room for 3 only once the entry at 10 leaves too.
            (20, 3, false, 0, Some(S + 10 - 20)),
            (S - 1, 1, false, 0, Some(1)),
            // At t = P, the entry at 0 no longer counts (s > t - P fails).
            (S, 0, true, 2, Some(0)),
            (S, 2, true, 0, Some(0)),
            (S + 9, 1, false, 0, Some(1)),
            (S + 10, 1, true, 0, Some(0)),
        ],
    );
}

#[test]
fn sliding_window_edges() {
    // 10 per 1s.
    let window = SlidingWindow::new(10, secs(1)).unwrap();
    expect(
        window,
        0,
        &[
            (900 * MS, 11, false, 10, None),
            (900 * MS, 10, true, 0, Some(0)),
            // cur + n > L: the window must roll, then 9P/10 of the way.
            (S - 1, 1, false, 0, Some(100 * MS + 1)),
            // At k*P the whole previous window still counts (e = 0):
            // room = 9, wait = P - 9P/10 = 100ms.
            (S, 1, false, 0, Some(100 * MS)),
            (S, 0, true, 0, Some(0)),
            (1_100 * MS - 1, 1, false, 0, Some(1)),
            (1_100 * MS, 1, true, 0, Some(0)),
            // Half-way, half of the previous window counts: 10 - 1 - 5.
            (1_500 * MS, 0, true, 4, Some(0)),
            (1_500 * MS, 4, true, 0, Some(0)),
            // cur = 5 + n > L - ... : room < 0 for n = 6: wait for the next
            // window (500ms) then until 5*(P - e) <= 4P: e >= 200ms.
            (1_500 * MS, 6, false, 0, Some(700 * MS)),
            (2_200 * MS - 1, 6, false, 5, Some(1)),
            (2_200 * MS, 6, true, 0, Some(0)),
            // Cost equal to the limit needs both windows empty of weight.
            (2_200 * MS, 10, false, 0, Some(1_800 * MS)),
            (4 * S, 10, true, 0, Some(0)),
        ],
    );
}

/// A calendar window is aligned on the calendar: another anchor fails,
/// naming it, instead of being dropped.
#[test]
fn a_calendar_window_refuses_another_anchor() {
    use ratelimit_core::algorithm::CalendarUnit;
    let monthly = FixedWindow::per_calendar_unit(100, CalendarUnit::Month).unwrap();
    for anchor in [Anchor::FirstRequest, Anchor::KeyOffset] {
        let err = monthly.with_anchor(anchor).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{anchor:?}")) && err.contains("Month"),
            "{err}"
        );
    }
    assert_eq!(monthly.with_anchor(Anchor::Aligned).unwrap(), monthly);
}
