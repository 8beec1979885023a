//! Calendar windows (`fixed-window L/week`, `/month`, `/year`) on a
//! `ManualClock`: each resets at the next UTC week, month or year, its
//! `reset` and `wait` are the exact time to that boundary, and the window
//! holding any instant matches a slow day-by-day count from the epoch.

use proptest::prelude::*;
use ratelimit_core::algorithm::CalendarUnit;
use ratelimit_core::{AnyAlgorithm, Clock, Decision, ManualClock, MemoryStore, Store};
use std::sync::OnceLock;

const SEC: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * SEC;

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn month_days(y: i64, m: u32) -> u32 {
    match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Every date a `u64` of nanoseconds reaches, day by day from 1970-01-01
/// (a Thursday): (year, month, day, weekday with Monday 0).
fn dates() -> &'static [(i64, u32, u32, u32)] {
    static DATES: OnceLock<Vec<(i64, u32, u32, u32)>> = OnceLock::new();
    DATES.get_or_init(|| {
        let (mut y, mut m, mut d, mut wd) = (1970, 1, 1, 3);
        let mut out = Vec::new();
        for _ in 0..=u64::MAX / DAY {
            out.push((y, m, d, wd));
            wd = (wd + 1) % 7;
            d += 1;
            if d > month_days(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        out
    })
}

/// `y-m-d h:00:00` UTC in ns since the epoch, from the slow table.
fn utc(y: i64, m: u32, d: u32, h: u64) -> u64 {
    let days = dates()
        .iter()
        .position(|&(yy, mm, dd, _)| (yy, mm, dd) == (y, m, d))
        .expect("a date the table holds");
    days as u64 * DAY + h * 3_600 * SEC
}

/// The unit holding `t` by the slow table: (start, length) in ns (a week
/// holding the first days starts before time 0, modulo 2^64).
fn slow_window(unit: CalendarUnit, t: u64) -> (u64, u64) {
    let days = (t / DAY) as usize;
    let (y, m, d, wd) = dates()[days];
    let (back, len) = match unit {
        CalendarUnit::Week => (wd as usize, 7),
        CalendarUnit::Month => (d as usize - 1, month_days(y, m)),
        CalendarUnit::Year => {
            let doy = (1..m).map(|mm| month_days(y, mm)).sum::<u32>() + d - 1;
            (doy as usize, if leap(y) { 366 } else { 365 })
        }
    };
    let start = (days as u64).wrapping_sub(back as u64).wrapping_mul(DAY);
    (start, u64::from(len) * DAY)
}

fn store(spec: &str) -> MemoryStore<AnyAlgorithm, String> {
    MemoryStore::new(spec.parse::<AnyAlgorithm>().unwrap())
}

fn check(store: &MemoryStore<AnyAlgorithm, String>, clock: &ManualClock) -> Decision {
    store.check("k", 1, clock.now()).value().unwrap()
}

/// With 2 per unit used up at `at`, the key is denied until `boundary`
/// exactly (its `reset` and `wait` say so), and admitted from there.
fn resets_at(spec: &str, at: u64, boundary: u64) {
    let clock = ManualClock::new();
    clock.set_nanos(at);
    let s = store(spec);
    assert!(check(&s, &clock).allowed, "{spec}");
    let second = check(&s, &clock);
    assert!(second.allowed, "{spec}");
    assert_eq!(second.reset.as_nanos(), u128::from(boundary - at), "{spec}");
    let denied = check(&s, &clock);
    assert!(!denied.allowed, "{spec}");
    assert_eq!(
        denied.retry_after().map(|w| w.as_nanos()),
        Some(u128::from(boundary - at)),
        "{spec}: waits until the boundary"
    );
    clock.set_nanos(boundary - 1);
    let last = check(&s, &clock);
    assert!(!last.allowed, "{spec}: 1ns before the boundary");
    assert_eq!(last.retry_after().map(|w| w.as_nanos()), Some(1), "{spec}");
    clock.set_nanos(boundary);
    let next = check(&s, &clock);
    assert!(next.allowed, "{spec}: a new window at the boundary");
    assert_eq!(next.remaining, 1, "{spec}");
}

#[test]
fn month_resets_on_the_first() {
    let spec = "fixed-window 2/month";
    resets_at(spec, utc(2025, 1, 31, 23), utc(2025, 2, 1, 0));
    resets_at(spec, utc(2025, 1, 1, 0), utc(2025, 2, 1, 0));
    // February of a non-leap and of a leap year.
    resets_at(spec, utc(2023, 2, 28, 12), utc(2023, 3, 1, 0));
    resets_at(spec, utc(2024, 2, 28, 12), utc(2024, 3, 1, 0));
    resets_at(spec, utc(2024, 2, 29, 23), utc(2024, 3, 1, 0));
    resets_at(spec, utc(2025, 12, 31, 23), utc(2026, 1, 1, 0));
    // The decision's window is the longest month's, in every month.
    let clock = ManualClock::new();
    clock.set_nanos(utc(2024, 2, 1, 0));
    assert_eq!(check(&store(spec), &clock).window.as_secs(), 31 * 86_400);
}

#[test]
fn week_resets_on_monday() {
    let spec = "fixed-window 2/week";
    // 2026-12-06 is a Sunday, 2026-12-07 a Monday.
    resets_at(spec, utc(2026, 12, 6, 23), utc(2026, 12, 7, 0));
    resets_at(spec, utc(2026, 12, 7, 0), utc(2026, 12, 14, 0));
    // The epoch was a Thursday: its week started before time 0.
    resets_at(spec, 0, utc(1970, 1, 5, 0));
}

#[test]
fn year_resets_on_january_first() {
    let spec = "fixed-window 2/year";
    resets_at(spec, utc(2024, 12, 31, 23), utc(2025, 1, 1, 0));
    resets_at(spec, utc(2024, 6, 15, 0), utc(2025, 1, 1, 0));
}

#[test]
fn refund_counts_only_in_its_month() {
    let s = store("fixed-window 1/month");
    let jan = utc(2025, 1, 31, 23);
    let feb = utc(2025, 2, 1, 0);
    assert!(s.check("k", 1, jan).value().unwrap().allowed);
    assert!(s.check("k", 1, feb).value().unwrap().allowed);
    // January's request refunded in February gives nothing back.
    s.refund("k", 1, jan, feb).value().unwrap();
    assert!(!s.check("k", 1, feb).value().unwrap().allowed);
    s.refund("k", 1, feb, feb).value().unwrap();
    assert!(s.check("k", 1, feb).value().unwrap().allowed);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// The window holding any instant is the slow table's.
    #[test]
    fn window_matches_day_by_day(t in any::<u64>(), unit in prop_oneof![
        Just(CalendarUnit::Week), Just(CalendarUnit::Month), Just(CalendarUnit::Year)
    ]) {
        prop_assert_eq!(unit.window(t), slow_window(unit, t));
    }
}
