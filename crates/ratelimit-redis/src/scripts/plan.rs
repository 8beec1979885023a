//! How an algorithm is run in Redis: its script and its fixed arguments.
//!
//! The scripts keep every number exact although Lua numbers are doubles
//! (exact only below 2^53): see the crate docs, "Exactness". This module
//! checks, once at build time, that a configuration stays inside the range
//! where that holds, and rejects it otherwise.

use crate::scripts::args::{
    FixedArgs, GcraArgs, LeakyArgs, LogArgs, Params, SlidingArgs, WindowsArg,
};
use crate::RedisBuildError;
use ratelimit_core::algorithm::{Anchor, AnyGcra, AnyLeakyBucket, CalendarUnit};
use ratelimit_core::plumbing::saturating_nanos;
use ratelimit_core::{Algorithm, AnyAlgorithm, FixedWindow, SlidingLog, SlidingWindow};
use std::sync::Arc;
use std::time::Duration;

const COMMON: &str = include_str!("lua/common.lua");
const CARRY: &str = include_str!("lua/carry.lua");
const SCALED: &str = include_str!("lua/scaled.lua");
const WINDOW: &str = include_str!("lua/window.lua");

/// Bound on every quantity a script forms as one number, with room for a
/// few additions below 2^53.
const LIMIT: u128 = 1 << 51;
const NANOS_PER_SEC: u64 = 1_000_000_000;
const DAY_NS: u64 = 86_400 * NANOS_PER_SEC;

/// What a store sends with every call of its script.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The script's source.
    pub(crate) source: String,
    /// The algorithm's parameters, `ARGV[8..]`.
    pub(crate) params: Params,
    /// A short fingerprint of the algorithm and its parameters, part of
    /// every key, so that two limits never share state.
    pub(crate) tag: String,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

fn unsupported(algorithm: &AnyAlgorithm, why: &str) -> RedisBuildError {
    RedisBuildError::Unsupported(format!("{algorithm}: {why}"))
}

/// A number the bounds checked below 2^51, as the script takes it.
fn number(algorithm: &AnyAlgorithm, x: u128) -> Result<u64, RedisBuildError> {
    u64::try_from(x).map_err(|_| unsupported(algorithm, "a parameter exceeds 64 bits"))
}

/// `T = P / L` as `(scale, T in whole ns, remainder)` and `count * T` as a
/// `(w, f)` pair, checking the script's bounds for up to `max_count`
/// intervals.
fn scaled(
    algorithm: &AnyAlgorithm,
    limit: u64,
    period: Duration,
    count: u64,
    max_count: u64,
) -> Result<[u64; 5], RedisBuildError> {
    let (l, p) = (u128::from(limit), nanos(period));
    let g = gcd(l, p);
    let (step, scale) = (p / g, l / g);
    let span = u128::from(max_count) * step / scale;
    if span >= LIMIT || u128::from(max_count) * scale >= LIMIT {
        return Err(unsupported(
            algorithm,
            "its window or its limit is too large for exact arithmetic in Lua \
             (each must stay below 2^51 ns, resp. 2^51 / (L / gcd(L, P)))",
        ));
    }
    let cap = u128::from(count) * step;
    let n = |x| number(algorithm, x);
    Ok([
        n(scale)?,
        n(step / scale)?,
        n(step % scale)?,
        n(cap / scale)?,
        n(cap % scale)?,
    ])
}

fn window(
    algorithm: &AnyAlgorithm,
    limit: u64,
    period: Duration,
) -> Result<[u64; 3], RedisBuildError> {
    let p = nanos(period);
    if p >= LIMIT || u128::from(limit) >= LIMIT {
        return Err(unsupported(
            algorithm,
            "the period must be below 2^51 ns (26 days) for exact arithmetic in Lua",
        ));
    }
    let pg = p / gcd(p, u128::from(NANOS_PER_SEC));
    Ok([number(algorithm, p)?, limit, number(algorithm, pg)?])
}

impl Plan {
    /// The plan for `algorithm`, or why it cannot run exactly in Redis.
    pub(crate) fn new(algorithm: &AnyAlgorithm, exact_log: bool) -> Result<Self, RedisBuildError> {
        let (body, params) = match algorithm {
            AnyAlgorithm::Gcra(g) => gcra_plan(algorithm, g)?,
            AnyAlgorithm::TokenBucket(t) => gcra_plan(algorithm, t.as_gcra())?,
            AnyAlgorithm::LeakyBucket(b) => leaky_plan(algorithm, b)?,
            AnyAlgorithm::FixedWindow(w) => (
                concat_src(&[WINDOW, include_str!("lua/fixed.lua")]),
                fixed_params(algorithm, w)?,
            ),
            AnyAlgorithm::SlidingWindow(w) => (
                concat_src(&[WINDOW, include_str!("lua/sliding.lua")]),
                sliding_params(algorithm, w)?,
            ),
            AnyAlgorithm::SlidingLog(l) => (
                concat_src(&[WINDOW, include_str!("lua/log.lua")]),
                log_params(algorithm, l, exact_log)?,
            ),
        };
        Ok(Self {
            source: format!("{COMMON}\n{CARRY}\n{body}"),
            tag: tag(algorithm, &params),
            params,
        })
    }
}

/// The script body and parameters of a GCRA (a token bucket's too).
fn gcra_plan(algorithm: &AnyAlgorithm, g: &AnyGcra) -> Result<(String, Params), RedisBuildError> {
    let burst = g.burst();
    let max = burst
        .checked_add(2)
        .ok_or_else(|| unsupported(algorithm, "burst"))?;
    let [scale, step_w, step_f, burst_w, burst_f] =
        scaled(algorithm, g.rate_limit(), g.period(), burst, max)?;
    let params = Params::Gcra(GcraArgs {
        scale,
        step_w,
        step_f,
        burst_w,
        burst_f,
        burst,
        stamp: None,
    });
    Ok((concat_src(&[SCALED, include_str!("lua/gcra.lua")]), params))
}

/// The script body and parameters of a leaky bucket.
fn leaky_plan(
    algorithm: &AnyAlgorithm,
    b: &AnyLeakyBucket,
) -> Result<(String, Params), RedisBuildError> {
    let q = b.queue();
    let max = q
        .checked_add(3)
        .ok_or_else(|| unsupported(algorithm, "queue"))?;
    let [scale, step_w, step_f, queue_w, queue_f] =
        scaled(algorithm, b.rate_limit(), b.period(), q, max)?;
    let params = Params::Leaky(LeakyArgs {
        scale,
        step_w,
        step_f,
        queue_w,
        queue_f,
        queue: q,
        stamp: None,
    });
    Ok((concat_src(&[SCALED, include_str!("lua/leaky.lua")]), params))
}

/// The fingerprint of `algorithm` and its parameters in its keys: its
/// short name and a hash of its name and numbers.
fn tag(algorithm: &AnyAlgorithm, params: &Params) -> String {
    let fingerprint = format!("{}:{}", algorithm.name(), params.texts().join(":"));
    format!(
        "{}:{:08x}",
        short_name(algorithm),
        ratelimit_core::algorithm::stable_hash(&fingerprint) as u32
    )
}

impl Plan {
    /// The plan of a live store (one following a `LiveAlgorithm`): its key
    /// names no numbers, only `live`, so that every setting of the limit
    /// (and every override) shares it, and a last parameter, the stamp of
    /// the settings (`kind:numbers`), is written with each state; a script
    /// finding a state of the same kind under another stamp carries it
    /// over, one of another kind is charged for what it used, then deleted
    /// (see `lua/common.lua` and `lua/carry.lua`).
    pub(crate) fn live(mut self, algorithm: &AnyAlgorithm) -> Self {
        let (kind, numbers) = match algorithm {
            AnyAlgorithm::Gcra(_) | AnyAlgorithm::TokenBucket(_) => ("g", 5),
            AnyAlgorithm::LeakyBucket(_) => ("l", 5),
            AnyAlgorithm::FixedWindow(_) => ("f", 2),
            AnyAlgorithm::SlidingWindow(_) => ("s", 3),
            AnyAlgorithm::SlidingLog(_) => ("o", 2),
        };
        let mut stamp = format!("{kind}:{}", self.params.texts()[..numbers].join(":"));
        if let AnyAlgorithm::FixedWindow(w) = algorithm {
            stamp.push_str(match (w.calendar_unit(), w.anchor()) {
                (Some(CalendarUnit::Week), _) => ":w",
                (Some(_), _) => ":M",
                (None, Anchor::Aligned) => ":a",
                (None, Anchor::FirstRequest) => ":r",
                (None, Anchor::KeyOffset) => ":k",
            });
        }
        *self.params.stamp_mut() = Some(Arc::from(stamp));
        self.tag = "live".to_owned();
        self
    }
}

/// The script checking several limits at once: each limit's own script
/// wrapped as a function of its `KEYS` and `ARGV` (the parameters shadow
/// the globals), then the driver `lua/multi.lua`.
pub(crate) fn multi_source<'a>(plans: impl IntoIterator<Item = &'a Plan>) -> String {
    let mut src = String::from("local lim = {}\n");
    for (i, plan) in plans.into_iter().enumerate() {
        src.push_str(&format!(
            "lim[{}] = function(KEYS, ARGV)\n{}\nend\n",
            i + 1,
            plan.source
        ));
    }
    src.push_str(include_str!("lua/multi.lua"));
    src
}

fn concat_src(parts: &[&str]) -> String {
    parts.join("\n")
}

fn short_name(algorithm: &AnyAlgorithm) -> &'static str {
    match algorithm {
        AnyAlgorithm::Gcra(_) => "gcra",
        AnyAlgorithm::TokenBucket(_) => "tb",
        AnyAlgorithm::LeakyBucket(_) => "lb",
        AnyAlgorithm::FixedWindow(_) => "fw",
        AnyAlgorithm::SlidingLog(_) => "sl",
        AnyAlgorithm::SlidingWindow(_) => "sw",
    }
}

fn fixed_params(algorithm: &AnyAlgorithm, w: &FixedWindow) -> Result<Params, RedisBuildError> {
    let (period, phase, windows) = match w.calendar_unit() {
        None if w.anchor() == Anchor::FirstRequest => (w.period(), 0, WindowsArg::FirstRequest),
        // The key-offset phase depends on the key: the store fills it in
        // per call (see `key_phase`); here it is 0.
        None => (w.period(), 0, WindowsArg::Phased),
        // Weeks are 7 days in phase with Monday 1970-01-05, 4 days in.
        Some(CalendarUnit::Week) => (w.period(), 4 * DAY_NS, WindowsArg::Phased),
        // A month is at most 31 days: its times stay below 2^53 ns as one
        // number, and the script finds its bounds by the calendar, never
        // by `t mod P` (which needs P below 2^51).
        Some(CalendarUnit::Month) => (Duration::from_secs(86_400), 0, WindowsArg::Month),
        Some(CalendarUnit::Year) => {
            return Err(unsupported(
                algorithm,
                "a calendar year (up to 366 days) is too long for exact arithmetic in Lua \
                 (its times in ns pass 2^53); use a month, or a memory store",
            ))
        }
    };
    let [period, limit, period_g] = window(algorithm, w.rate_limit(), period)?;
    Ok(Params::Fixed(FixedArgs {
        period,
        limit,
        period_g,
        phase,
        windows,
        stamp: None,
    }))
}

fn sliding_params(algorithm: &AnyAlgorithm, w: &SlidingWindow) -> Result<Params, RedisBuildError> {
    let [period, limit, period_g] = window(algorithm, w.rate_limit(), w.period())?;
    Ok(Params::Sliding(SlidingArgs {
        period,
        limit,
        period_g,
        stamp: None,
    }))
}

fn log_params(
    algorithm: &AnyAlgorithm,
    l: &SlidingLog,
    exact: bool,
) -> Result<Params, RedisBuildError> {
    let [period, limit, period_g] = window(algorithm, l.rate_limit(), l.period())?;
    Ok(Params::Log(LogArgs {
        period,
        limit,
        period_g,
        exact,
        stamp: None,
    }))
}

/// The window phase of `key` for a fixed window anchored at a key offset,
/// derived as ratelimit-core derives it for the key as rendered (its text:
/// the keys of tower-ratelimit hash their `Display` text in memory too), or
/// `None` for every other algorithm.
pub(crate) fn key_phase(algorithm: &AnyAlgorithm, key: &str) -> Option<u64> {
    match algorithm {
        AnyAlgorithm::FixedWindow(w) if w.anchor() == Anchor::KeyOffset => {
            let p = saturating_nanos(w.period());
            Some(ratelimit_core::algorithm::stable_hash(key) % p)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::{Gcra, MemoryStore, Store};

    /// The phase of a key is fixed bytes hashed (FNV-1a of the key's text):
    /// no compiler or platform moves it, and the in-memory store derives
    /// the same window for the same key.
    #[test]
    fn key_phases_are_fixed_and_match_memory() {
        let period = Duration::from_secs(1);
        let window: AnyAlgorithm = FixedWindow::new(1, period)
            .unwrap()
            .with_anchor(Anchor::KeyOffset)
            .unwrap()
            .into();
        // stable_hash("user-1") = 0xf84b_a2aa_754a_4bd4.
        let phase = key_phase(&window, "user-1").unwrap();
        assert_eq!(phase, 0xf84b_a2aa_754a_4bd4 % 1_000_000_000);
        assert_eq!(phase, 655_370_708);
        // In memory, the key's window ends at its phase: a request just
        // before is in the first window, one at the phase in the second.
        let memory = MemoryStore::<AnyAlgorithm, String>::new(window);
        assert!(
            memory
                .check("user-1", 1, phase - 1)
                .value()
                .unwrap()
                .allowed
        );
        assert!(
            !memory
                .check("user-1", 1, phase - 1)
                .value()
                .unwrap()
                .allowed
        );
        assert!(memory.check("user-1", 1, phase).value().unwrap().allowed);
        // Other algorithms have no phase.
        let gcra: AnyAlgorithm = Gcra::new(1, period).unwrap().into();
        assert_eq!(key_phase(&gcra, "user-1"), None);
    }
}
