//! Linearizability of the memory store: many threads check, refund,
//! reset, ban and unban several keys in bursts at frozen instants, and each
//! key's history must have an order, consistent with real time, in which
//! the reference model gives every answer seen
//! (`ratelimit_test_support::history`). Stores with a planted bug (a
//! refund applied twice, a ban's denial kept past an unban, a lease spent
//! twice) show the checker catches each.

use crate::model::Spec;
use ratelimit_core::store::NeverPending;
use ratelimit_core::{
    BanPolicy, Decision, FixedWindow, Gcra, MemoryStore, SlidingWindow, Store, StoreError,
};
use ratelimit_test_support::history::{
    admitted_cost, Answer, Checker, Event, Mix, Op, Recorder, Summary,
};
use ratelimit_test_support::SplitMix64;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const THREADS: u64 = 8;
/// Bursts, each at its own instant, threads meeting between them.
const PHASES: u64 = 12;
/// Keys of a burst, so that threads meet on them: a set of `HOT` keys
/// is used for `SPAN` bursts, then the next.
const HOT: u64 = 4;
const SPAN: u64 = 3;
/// Operations per thread and burst: 8 * 8 * 3 / 4 = 48 per key.
const EACH: u64 = 8;
/// The keys of `run_one_instant`.
const KEYS: u64 = 24;
const SECOND: u64 = 1_000_000_000;
/// The first burst's instant: whole seconds, so windows start there.
const T0: u64 = 1_700_000_000 * SECOND;

/// A check's answer, in the checker's terms.
fn answer(d: &Decision) -> Answer {
    Answer::new(d.allowed, d.remaining, d.wait, d.banned)
}

/// Does `op` on `store` at `now`: a check's answer.
fn call<S: Store<u64>>(store: &S, key: u64, op: Op, now: u64) -> Option<Answer> {
    let done = |r: Option<Result<(), StoreError>>| r.expect("at once").expect("no error");
    match op {
        Op::Check(cost) => {
            let d = store
                .check(&key, cost, now)
                .into_ready()
                .ok()
                .expect("at once");
            return Some(answer(&d.expect("no error")));
        }
        Op::Settle {
            reserved,
            actual,
            admitted_at,
        } => {
            let d = store
                .settle(&key, reserved, actual, admitted_at, now)
                .into_ready()
                .ok();
            return Some(answer(&d.expect("at once").expect("no error")));
        }
        Op::Refund { cost, admitted_at } => {
            done(store.refund(&key, cost, admitted_at, now).into_ready().ok())
        }
        Op::Reset => done(store.reset(&key).into_ready().ok()),
        Op::Ban(d) => done(
            store
                .ban(&key, Duration::from_nanos(d), now)
                .into_ready()
                .ok(),
        ),
        Op::Unban => done(store.unban(&key).into_ready().ok()),
    }
    None
}

/// `THREADS` threads, `PHASES` bursts `step` ns apart, each thread doing
/// `EACH` random operations of `mix` per burst on random keys of the
/// burst's set: the history.
fn run<S: Store<u64>>(store: &S, mix: Mix, step: u64, seed: u64) -> Vec<Event<u64>> {
    let rec = Recorder::new();
    let arrived = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (rec, arrived) = (&rec, &arrived);
            s.spawn(move || {
                let mut rng = SplitMix64(seed ^ thread.wrapping_mul(0x9e37_79b9));
                let mut mine = Vec::new();
                for phase in 0..PHASES {
                    let now = T0 + phase * step;
                    let earlier = T0 + rng.below(phase + 1) * step;
                    meet(arrived, phase);
                    for _ in 0..EACH {
                        let key = phase / SPAN * HOT + rng.below(HOT);
                        let op = mix.op(&mut rng, earlier, 2 * step);
                        let at = rec.invoke();
                        let seen = call(store, key, op, now);
                        mine.push(rec.returned(at, key, op, now, seen));
                    }
                }
                rec.add(mine);
            });
        }
    });
    rec.events()
}

/// Waits until every thread has arrived at `phase`, spinning so that the
/// threads start together.
fn meet(arrived: &AtomicU64, phase: u64) {
    arrived.fetch_add(1, Ordering::SeqCst);
    while arrived.load(Ordering::SeqCst) < THREADS * (phase + 1) {
        std::thread::yield_now();
    }
}

/// Runs `store` through `run` under several seeds and checks every
/// history against `spec`.
fn linearizable<S: Store<u64>>(make: impl Fn() -> S, spec: Spec, mix: Mix, step: u64) {
    linearizable_with(make, Checker::new(spec), mix, step);
}

/// [`linearizable`] with `checker`.
fn linearizable_with<S: Store<u64>>(make: impl Fn() -> S, checker: Checker, mix: Mix, step: u64) {
    let started = Instant::now();
    let mut all = Summary::default();
    for seed in 0..32 {
        let events = run(&make(), mix, step, seed);
        match checker.check(&events) {
            Ok(s) => all.add(s),
            Err(v) => panic!("seed {seed}: {v}"),
        }
    }
    eprintln!("{checker:?} {mix:?}: {all}, {:?}", started.elapsed());
}

fn gcra_spec() -> (Gcra, Spec) {
    let gcra = Gcra::with_burst(4, Duration::from_secs(1), 6).unwrap();
    (
        gcra,
        Spec::Gcra {
            limit: 4,
            period: SECOND,
            burst: 6,
        },
    )
}

#[test]
fn memory_gcra_is_linearizable() {
    let (gcra, spec) = gcra_spec();
    for deny_cache in [true, false] {
        let make = || {
            MemoryStore::<Gcra, u64>::builder(gcra)
                .shards(4)
                .deny_cache(deny_cache)
                .build()
                .unwrap()
        };
        linearizable(make, spec, Mix::ALL, SECOND / 5);
        linearizable(make, spec, Mix::CHECKS, SECOND / 5);
        linearizable(make, spec, SETTLES, SECOND / 5);
    }
}

/// Every operation, settlements into debt too (GCRA).
const SETTLES: Mix = Mix {
    settle: 15,
    ..Mix::ALL
};

/// A ban policy (no escalation): a denial with nothing left bans the key,
/// atomically with the check that denied it.
#[test]
fn memory_bans_on_denial_are_linearizable() {
    let (gcra, spec) = gcra_spec();
    let ban = Duration::from_millis(700);
    let make = || {
        MemoryStore::<Gcra, u64>::builder(gcra)
            .ban(Some(BanPolicy::new(ban).unwrap()))
            .build()
            .unwrap()
    };
    let checker = Checker::new(spec).ban_on_denial(ban.as_nanos() as u64);
    linearizable_with(make, checker, Mix::ALL, SECOND / 5);
    linearizable_with(make, checker, Mix::CHECKS, SECOND / 5);
    // Checks alone earn bans, which a model without the policy refuses.
    let events = run(&make(), Mix::CHECKS, SECOND / 5, 0);
    assert!(events.iter().any(|e| e.answer.is_some_and(|a| a.banned)));
    assert!(Checker::new(spec).check(&events).is_err());
}

#[test]
fn memory_sliding_window_is_linearizable() {
    let window = SlidingWindow::new(8, Duration::from_secs(1)).unwrap();
    let spec = Spec::Window {
        limit: 8,
        period: SECOND,
    };
    for deny_cache in [true, false] {
        let make = || {
            MemoryStore::<SlidingWindow, u64>::builder(window)
                .deny_cache(deny_cache)
                .build()
                .unwrap()
        };
        linearizable(make, spec, Mix::ALL, SECOND / 3);
    }
}

#[test]
fn memory_fixed_window_is_linearizable() {
    let fixed = FixedWindow::new(7, Duration::from_secs(1)).unwrap();
    let spec = Spec::Fixed {
        limit: 7,
        period: SECOND,
        anchor: crate::model::anchor(ratelimit_core::algorithm::Anchor::Aligned),
    };
    let make = || MemoryStore::<FixedWindow, u64>::new(fixed);
    linearizable(make, spec, Mix::ALL, SECOND / 3);
}

/// A bug planted in a store wrapper, so that no production code needs a
/// switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    None,
    /// Every refund is applied twice.
    RefundTwice,
    /// Bans' denials are remembered locally, and an unban forgets nothing.
    DenialKeptPastUnban,
    /// A lease of `LEASE` units answers one check more than it holds (with
    /// [`Planted::leasing`]).
    LeaseSpentTwice,
    /// Checks count in a table of their own, read and written back
    /// under two locks: concurrent checks lose each other's updates.
    LostUpdate,
}

const LEASE: u64 = 3;

/// A memory store behind a wrapper that may misbehave ([`Bug`]).
struct Planted {
    inner: MemoryStore<Gcra, u64>,
    bug: Bug,
    /// Whether cost-1 checks are spent from local leases.
    lease: bool,
    /// Remembered bans: key to the instant the ban ends.
    bans: Mutex<HashMap<u64, u64>>,
    /// Leases: key to units left.
    leases: Mutex<HashMap<u64, u64>>,
    /// Cost used per key (`Bug::LostUpdate` only).
    used: Mutex<HashMap<u64, u64>>,
}

impl Planted {
    fn new(bug: Bug) -> Self {
        Self {
            inner: MemoryStore::new(gcra_spec().0),
            bug,
            lease: false,
            bans: Mutex::default(),
            leases: Mutex::default(),
            used: Mutex::default(),
        }
    }

    /// The store spending cost-1 checks from local leases of `LEASE`.
    fn leasing(bug: Bug) -> Self {
        Self {
            lease: true,
            ..Self::new(bug)
        }
    }

    fn decide(&self, key: u64, cost: u64, now: u64) -> Result<Decision, StoreError> {
        if cost == 1 && self.lease {
            return self.leased(key, now);
        }
        if self.bug == Bug::LostUpdate {
            return Ok(self.racy(key, cost));
        }
        let until = self.bans.lock().unwrap().get(&key).copied();
        if let Some(until) = until.filter(|&u| cost > 0 && now < u) {
            let left = Duration::from_nanos(until - now);
            return Ok(Decision::ban(6, Duration::from_millis(1500), left));
        }
        self.inner.check(&key, cost, now).value()
    }

    /// A check of the burst at one instant, counted in `used`: read, a
    /// pause, written back.
    fn racy(&self, key: u64, cost: u64) -> Decision {
        let (burst, window) = (6, Duration::from_millis(1500));
        let used = self.used.lock().unwrap().get(&key).copied().unwrap_or(0);
        std::thread::sleep(Duration::from_micros(50));
        if used + cost > burst {
            let wait = Duration::from_millis(250 * (used + cost - burst));
            return Decision::new(
                false,
                burst - used,
                Some(wait),
                burst,
                window,
                window,
                window,
            );
        }
        self.used.lock().unwrap().insert(key, used + cost);
        let left = burst - used - cost;
        Decision::new(
            true,
            left,
            Some(Duration::ZERO),
            burst,
            window,
            window,
            window,
        )
    }

    /// A check spent from a lease of `LEASE` units, taken when none is
    /// held (a check of cost 1 when fewer are left).
    fn leased(&self, key: u64, now: u64) -> Result<Decision, StoreError> {
        let mut leases = self.leases.lock().unwrap();
        let left = leases.entry(key).or_insert(0);
        if *left == 0 {
            let take = self.inner.check(&key, LEASE, now).value()?;
            if !take.allowed {
                return self.inner.check(&key, 1, now).value();
            }
            *left = LEASE + u64::from(self.bug == Bug::LeaseSpentTwice);
        }
        *left -= 1;
        self.inner.check(&key, 0, now).value()
    }
}

impl Store<u64> for Planted {
    type CheckFuture = NeverPending<Result<Decision, StoreError>>;
    type WriteFuture = NeverPending<Result<(), StoreError>>;

    fn check(&self, key: &u64, cost: u64, now: u64) -> Ready<Decision> {
        ratelimit_core::Answer::ready(self.decide(*key, cost, now))
    }

    fn refund(&self, key: &u64, cost: u64, admitted_at: u64, now: u64) -> Ready<()> {
        let times = if self.bug == Bug::RefundTwice { 2 } else { 1 };
        for _ in 0..times {
            self.inner
                .refund(key, cost, admitted_at, now)
                .value()
                .unwrap();
        }
        ratelimit_core::Answer::ready(Ok(()))
    }

    fn reset(&self, key: &u64) -> Ready<()> {
        self.inner.reset(key).value().unwrap();
        ratelimit_core::Answer::ready(Ok(()))
    }

    fn ban(&self, key: &u64, d: Duration, now: u64) -> Ready<()> {
        self.inner.ban(key, d, now).value().unwrap();
        let until = now + d.as_nanos() as u64;
        self.bans.lock().unwrap().insert(*key, until);
        ratelimit_core::Answer::ready(Ok(()))
    }

    fn unban(&self, key: &u64) -> Ready<()> {
        self.inner.unban(key).value().unwrap();
        if self.bug != Bug::DenialKeptPastUnban {
            self.bans.lock().unwrap().remove(key);
        }
        ratelimit_core::Answer::ready(Ok(()))
    }
}

impl ratelimit_core::store::Upkeep for Planted {}

/// A [`Planted`] store's answer, always ready.
type Ready<T> = ratelimit_core::Answer<Result<T, StoreError>, NeverPending<Result<T, StoreError>>>;

/// Whether the checker refuses some history of `bug`'s store, out of
/// eight seeds.
fn caught(bug: Bug) -> bool {
    let spec = gcra_spec().1;
    (0..8).any(|seed| {
        let events = run(&Planted::new(bug), Mix::ALL, SECOND / 5, seed);
        Checker::new(spec).check(&events).is_err()
    })
}

#[test]
fn the_wrapper_without_a_bug_is_linearizable() {
    linearizable(
        || Planted::new(Bug::None),
        gcra_spec().1,
        Mix::ALL,
        SECOND / 5,
    );
}

#[test]
fn a_refund_applied_twice_is_caught() {
    assert!(caught(Bug::RefundTwice));
}

#[test]
fn a_denial_kept_past_an_unban_is_caught() {
    assert!(caught(Bug::DenialKeptPastUnban));
}

/// Checks that lose each other's updates (two overlapping checks both
/// see the same count) are caught.
#[test]
fn a_lost_update_is_caught() {
    let checker = Checker::new(gcra_spec().1).ignore_wait();
    let alone = run_one_instant(&Planted::new(Bug::LostUpdate), 1);
    assert!(checker.check(&alone).is_ok(), "one thread loses nothing");
    let events = run_one_instant(&Planted::new(Bug::LostUpdate), THREADS);
    assert!(checker.check(&events).is_err());
}

/// Leases are not linearizable by design; their contract is a bound. At
/// one instant it is the burst itself: units are counted when taken, so
/// no key is admitted more than the burst. A lease spent twice passes it.
#[test]
fn a_lease_spent_twice_passes_the_bound() {
    let burst = 6;
    let overshoot = |bug| {
        let events = run_one_instant(&Planted::leasing(bug), THREADS);
        let most = admitted_cost(&events).into_values().max().unwrap();
        most.saturating_sub(burst)
    };
    assert_eq!(overshoot(Bug::None), 0);
    assert!(overshoot(Bug::LeaseSpentTwice) > 0);
    // Its answers are not the model's either.
    let events = run_one_instant(&Planted::leasing(Bug::LeaseSpentTwice), THREADS);
    assert!(Checker::new(gcra_spec().1).check(&events).is_err());
}

/// `threads` threads check every key, cost 1, at one instant.
fn run_one_instant<S: Store<u64>>(store: &S, threads: u64) -> Vec<Event<u64>> {
    let rec = Recorder::new();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for i in 0..4 * KEYS {
                    let key = i % KEYS;
                    let at = rec.invoke();
                    let seen = call(store, key, Op::Check(1), T0);
                    rec.record(at, key, Op::Check(1), T0, seen);
                }
            });
        }
    });
    rec.events()
}
