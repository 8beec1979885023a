//! Random sequences of checks and live changes (rates, capacities and
//! periods, repeated and reverted, of one kind or across kinds) on a
//! manual clock never admit more than the rule of docs/ALGORITHMS.md
//! ("Live settings"): a change frees nothing, and over any interval a key
//! is admitted at most what the most generous settings in force over it
//! allow.

use proptest::prelude::*;
use ratelimit_core::{AnyAlgorithm, LiveAlgorithm, MemoryStore, Store};

const MIN: u64 = 60_000_000_000;

/// One of the settings a run moves between, with the numbers of its
/// bound: the capacity `C` and the rate `L` per `P` (for the windows and
/// the log, `C = L`).
struct Setting {
    text: &'static str,
    capacity: u64,
    rate: u64,
    period: u64,
}

const fn s(text: &'static str, capacity: u64, rate: u64, minutes: u64) -> Setting {
    Setting {
        text,
        capacity,
        rate,
        period: minutes * MIN,
    }
}

/// The families whose bound is stated in ALGORITHMS.md, each a pool of
/// settings a run moves between.
#[derive(Debug, Clone, Copy)]
enum Family {
    /// gcra, token-bucket, leaky-bucket (`C` = burst, capacity, `Q + 1`):
    /// at most `C_max + floor(d * max(L / P))` in any interval of length `d`.
    Bucket,
    /// Aligned fixed and sliding windows whose periods divide each other:
    /// at most `L_max * (floor(d / P_min) + 2)`.
    Aligned,
    /// First-request fixed windows, any periods: the same bound.
    FirstRequest,
    /// Sliding logs: at most `L_max * (floor(d / P_min) + 1)`.
    Log,
}

const BUCKET: &[Setting] = &[
    s("gcra 3/1h", 3, 3, 60),
    s("gcra 3/1h burst 5", 5, 3, 60),
    s("gcra 2/1h", 2, 2, 60),
    s("gcra 6/2h burst 1", 1, 6, 120),
    s("token-bucket 4 refill 1/10m", 4, 1, 10),
    s("token-bucket 2 refill 3/1h", 2, 3, 60),
    s("leaky-bucket 2/1h queue 3", 4, 2, 60),
    s("leaky-bucket 1/30m queue 0", 1, 1, 30),
];
const ALIGNED: &[Setting] = &[
    s("fixed-window 3/1h", 3, 3, 60),
    s("fixed-window 2/1h", 2, 2, 60),
    s("fixed-window 5/2h", 5, 5, 120),
    s("fixed-window 1/30m", 1, 1, 30),
    s("sliding-window 3/1h", 3, 3, 60),
    s("sliding-window 2/30m", 2, 2, 30),
    s("sliding-window 4/2h", 4, 4, 120),
];
const FIRST: &[Setting] = &[
    s("fixed-window 3/1h anchor first-request", 3, 3, 60),
    s("fixed-window 2/40m anchor first-request", 2, 2, 40),
    s("fixed-window 5/2h anchor first-request", 5, 5, 120),
    s("fixed-window 1/25m anchor first-request", 1, 1, 25),
];
const LOG: &[Setting] = &[
    s("sliding-log 3/1h", 3, 3, 60),
    s("sliding-log 2/1h", 2, 2, 60),
    s("sliding-log 5/2h", 5, 5, 120),
    s("sliding-log 1/20m", 1, 1, 20),
    s("sliding-log 4/45m", 4, 4, 45),
];

impl Family {
    fn pool(self) -> &'static [Setting] {
        match self {
            Self::Bucket => BUCKET,
            Self::Aligned => ALIGNED,
            Self::FirstRequest => FIRST,
            Self::Log => LOG,
        }
    }

    /// The most a key may be admitted over `d` ns under `settings`.
    fn bound(self, settings: &[&Setting], d: u64) -> u128 {
        let c_max = u128::from(settings.iter().map(|s| s.capacity).max().unwrap());
        let p_min = u128::from(settings.iter().map(|s| s.period).min().unwrap());
        let d = u128::from(d);
        match self {
            Self::Bucket => {
                let refill = settings
                    .iter()
                    .map(|s| d * u128::from(s.rate) / u128::from(s.period));
                c_max + refill.max().unwrap()
            }
            Self::Aligned | Self::FirstRequest => c_max * (d / p_min + 2),
            Self::Log => c_max * (d / p_min + 1),
        }
    }
}

/// A step: time moves on by `dt`, then a check of `cost` (0 is a peek),
/// or a change to setting `to` of the pool (modulo its length).
#[derive(Debug, Clone)]
enum Step {
    Check { dt: u64, cost: u64 },
    Change { dt: u64, to: usize },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![3 => Just(0u64), 2 => 0..5 * MIN, 1 => 0..180 * MIN];
    let step = prop_oneof![
        3 => (dt.clone(), 0u64..4).prop_map(|(dt, cost)| Step::Check { dt, cost }),
        2 => (dt, 0usize..8).prop_map(|(dt, to)| Step::Change { dt, to }),
    ];
    prop::collection::vec(step, 1..80)
}

fn spec(text: &str) -> AnyAlgorithm {
    text.parse().unwrap()
}

/// What a run admitted, `(at, cost, the index of the change in force)`,
/// and the settings it changed to, in order (the first one first).
type Trace = (Vec<(u64, u64, usize)>, Vec<usize>);

/// Runs `steps` over settings `pool` (moving between them at random);
/// checks at every change that it frees nothing: what is left after it
/// is at most the new limit less what was used before it.
fn run(pool: &[&Setting], steps: &[Step]) -> Result<Trace, TestCaseError> {
    let live = LiveAlgorithm::new(spec(pool[0].text));
    let store = MemoryStore::<_, u64>::builder(live.clone())
        .shards(1)
        .build()
        .unwrap();
    let (mut now, mut admitted, mut changes) = (0u64, Vec::new(), vec![0]);
    for step in steps {
        match *step {
            Step::Check { dt, cost } => {
                now += dt;
                if store.check(&0, cost, now).value().unwrap().allowed && cost > 0 {
                    admitted.push((now, cost, changes.len() - 1));
                }
            }
            Step::Change { dt, to } => {
                now += dt;
                let to = to % pool.len();
                let before = store.check(&0, 0, now).value().unwrap();
                live.set(spec(pool[to].text));
                let after = store.check(&0, 0, now).value().unwrap();
                let used = before.limit - before.remaining;
                prop_assert!(
                    after.remaining <= after.limit.saturating_sub(used),
                    "-> {} at {now}: {before:?} then {after:?}",
                    pool[to].text
                );
                changes.push(to);
            }
        }
    }
    Ok((admitted, changes))
}

/// Every interval between two admissions holds at most the family's bound
/// under the settings in force over it.
fn within_bound(family: Family, steps: &[Step]) -> Result<(), TestCaseError> {
    let pool: Vec<&Setting> = family.pool().iter().collect();
    let (admitted, changes) = run(&pool, steps)?;
    for (i, &(a, _, first)) in admitted.iter().enumerate() {
        let mut total = 0u128;
        for &(b, cost, last) in &admitted[i..] {
            total += u128::from(cost);
            // In force over [a, b]: the one at a, and every one set until b.
            let in_force: Vec<&Setting> =
                changes[first..=last].iter().map(|&to| pool[to]).collect();
            let bound = family.bound(&in_force, b - a);
            prop_assert!(
                total <= bound,
                "{family:?}: {total} in [{a}, {b}], bound {bound}"
            );
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn live_changes_of_one_family_keep_its_bound(family in 0u8..4, steps in steps()) {
        let family = [Family::Bucket, Family::Aligned, Family::FirstRequest, Family::Log]
            [usize::from(family)];
        within_bound(family, &steps)?;
    }

    #[test]
    fn live_changes_across_kinds_free_nothing(picks in prop::collection::vec(0usize..24, 2..8),
                                               steps in steps()) {
        let all: Vec<&Setting> = BUCKET.iter().chain(ALIGNED).chain(FIRST).chain(LOG).collect();
        let pool: Vec<&Setting> = picks.iter().map(|&i| all[i % all.len()]).collect();
        run(&pool, &steps)?;
    }
}
