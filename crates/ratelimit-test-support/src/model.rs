//! Reference models of the six algorithms, written straight from the
//! contract's formulas (`docs/ALGORITHMS.md`) and independent of the crate's
//! implementation.
//!
//! Exactness: GCRA, the token bucket and the leaky bucket count time in units
//! of `1 / L` nanoseconds, so `T = P / L` is the whole number `P` and every
//! quantity is an integer (`u128`/`i128`). A wait is reported as the exact
//! rational wait rounded up to a whole nanosecond. The window algorithms
//! work in plain nanoseconds (`u128`/`i128`), with overflow-free comparisons.
//!
//! Used by `ratelimit-core`'s and `ratelimit-sim`'s tests. It depends on
//! none of the workspace's crates: the fixed window's anchor is its own
//! [`Anchor`], and the key-offset anchor takes the key hash as a function
//! ([`Model::with_key_hash`], `ratelimit_core::algorithm::stable_hash` in the tests).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Where a fixed window's windows start (`ratelimit_core::algorithm::Anchor`).
///
/// ```
/// use ratelimit_test_support::model::{Anchor, Model, Spec};
///
/// let spec = Spec::Fixed { limit: 1, period: 1_000, anchor: Anchor::FirstRequest };
/// let mut model = Model::new(spec);
/// assert!(model.check(&"k", 1, 500).allowed);
/// assert!(!model.check(&"k", 1, 1_400).allowed); // its window opened at 500
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Anchor {
    /// Windows `[k*P, (k+1)*P)`.
    Aligned,
    /// A window opens at the first admitted request after the previous one
    /// ended.
    FirstRequest,
    /// Windows `[k*P + o, (k+1)*P + o)`, `o` = the key's hash mod `P`.
    KeyOffset,
}

/// An algorithm and its settings, as the contract names them. Periods are
/// in nanoseconds.
///
/// ```
/// use ratelimit_test_support::model::Spec;
///
/// let gcra = Spec::Gcra { limit: 10, period: 1_000_000_000, burst: 5 };
/// assert_eq!(gcra.capacity(), 5);
/// ```
// The fields are the contract's settings, named in each variant's doc.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spec {
    /// `gcra --limit L --period P --burst B` (the token bucket is
    /// `Gcra { limit: R, period: P, burst: C }`).
    Gcra { limit: u64, period: u64, burst: u64 },
    /// `leaky-bucket --limit L --period P --queue Q`.
    Leaky { limit: u64, period: u64, queue: u64 },
    /// `fixed-window --limit L --period P --anchor ...` (plus the per-key
    /// offset anchor of the library).
    Fixed {
        limit: u64,
        period: u64,
        anchor: Anchor,
    },
    /// `sliding-log --limit L --period P`.
    Log { limit: u64, period: u64 },
    /// `sliding-window --limit L --period P`.
    Window { limit: u64, period: u64 },
}

impl Spec {
    /// The largest cost that can ever be admitted.
    pub fn capacity(&self) -> u64 {
        match *self {
            Spec::Gcra { burst, .. } => burst,
            Spec::Leaky { queue, .. } => queue.saturating_add(1),
            Spec::Fixed { limit, .. } | Spec::Log { limit, .. } | Spec::Window { limit, .. } => {
                limit
            }
        }
    }

    /// The period `P` in nanoseconds.
    pub fn period(&self) -> u64 {
        match *self {
            Spec::Gcra { period, .. }
            | Spec::Leaky { period, .. }
            | Spec::Fixed { period, .. }
            | Spec::Log { period, .. }
            | Spec::Window { period, .. } => period,
        }
    }

    /// The limit `L`.
    pub fn limit(&self) -> u64 {
        match *self {
            Spec::Gcra { limit, .. }
            | Spec::Leaky { limit, .. }
            | Spec::Fixed { limit, .. }
            | Spec::Log { limit, .. }
            | Spec::Window { limit, .. } => limit,
        }
    }
}

/// What the contract says a request gets.
///
/// ```
/// use ratelimit_test_support::model::{Model, Out, Spec};
///
/// let mut model = Model::new(Spec::Log { limit: 1, period: 1_000 });
/// model.check(&"k", 1, 0);
/// let out: Out = model.check(&"k", 1, 0);
/// assert_eq!(out, Out { allowed: false, remaining: 0, wait: Some(1_000) });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out {
    /// Admitted?
    pub allowed: bool,
    /// The contract's `remaining`.
    pub remaining: u128,
    /// The wait in nanoseconds, rounded up; `None` for never.
    pub wait: Option<u128>,
}

/// One key's state in the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum St {
    /// GCRA: `TAT` in units of `1 / L` ns; absent at first.
    Tat(Option<u128>),
    /// Leaky bucket: `D` in units of `1 / L` ns; absent at first.
    Dep(Option<i128>),
    /// Fixed window, aligned or key-offset: the window index and its count.
    Aligned { index: Option<i128>, count: u128 },
    /// Fixed window, first-request: the open window's start, and its count.
    First { start: Option<u128>, count: u128 },
    /// Sliding log: every admitted `(time, cost)`.
    Log(Vec<(u128, u128)>),
    /// Sliding window: admitted cost per aligned window index.
    Window(BTreeMap<u128, u128>),
}

/// A keyed reference model.
///
/// ```
/// use ratelimit_test_support::model::{Model, Spec};
///
/// let mut model = Model::new(Spec::Window { limit: 2, period: 1_000 });
/// assert!(model.check(&"k", 2, 0).allowed);
/// assert!(!model.check(&"k", 1, 10).allowed);
/// ```
#[derive(Debug, Clone)]
pub struct Model<K> {
    spec: Spec,
    keys: HashMap<K, St>,
    key_hash: Option<fn(&K) -> u64>,
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

fn floor_div_i(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

impl<K: Hash + Eq + Clone> Model<K> {
    /// A model with no keys. [`Anchor::KeyOffset`] needs
    /// [`with_key_hash`](Self::with_key_hash) too.
    pub fn new(spec: Spec) -> Self {
        Self {
            spec,
            keys: HashMap::new(),
            key_hash: None,
        }
    }

    /// The key hash whose value mod `P` is a key's window offset
    /// ([`Anchor::KeyOffset`]).
    pub fn with_key_hash(mut self, hash: fn(&K) -> u64) -> Self {
        self.key_hash = Some(hash);
        self
    }

    /// The settings.
    pub fn spec(&self) -> Spec {
        self.spec
    }

    /// Decides a request of cost `n` for `key` at `t` nanoseconds (the
    /// stores' argument order: key, cost, time).
    pub fn check(&mut self, key: &K, n: u64, t: u64) -> Out {
        let spec = self.spec;
        let offset = self.offset(key);
        let st = self
            .keys
            .entry(key.clone())
            .or_insert_with(|| St::new(spec));
        st.check(spec, offset, n, t)
    }

    /// `key`'s window offset: its hash mod `P` under
    /// [`Anchor::KeyOffset`], else 0.
    fn offset(&self, key: &K) -> u64 {
        match self.spec {
            Spec::Fixed {
                period,
                anchor: Anchor::KeyOffset,
                ..
            } => {
                let hash = self
                    .key_hash
                    .expect("Anchor::KeyOffset needs Model::with_key_hash");
                hash(key) % period
            }
            _ => 0,
        }
    }
}

/// One key's state and ban, copied and compared by searches over orders
/// of operations (the [`history`](crate::history) checker): checks,
/// refunds, resets, bans and unbans, as the contract's "Refunds",
/// "Resets" and "Bans" say.
///
/// ```
/// use ratelimit_test_support::model::{KeyState, Spec};
///
/// let spec = Spec::Gcra { limit: 2, period: 10, burst: 2 };
/// let mut key = KeyState::new(spec, 0);
/// assert!(key.check(1, 0).allowed && key.check(1, 0).allowed);
/// assert!(!key.check(1, 0).allowed);
/// key.refund(1, 0, 0);
/// assert_eq!(key.check(0, 0).remaining, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyState {
    spec: Spec,
    offset: u64,
    st: St,
    /// The instant the key's ban ends, if banned.
    banned_until: Option<u64>,
    /// A ban policy without escalation: a denial with nothing left that
    /// could succeed later bans for this many ns.
    ban_on_denial: Option<u64>,
}

impl KeyState {
    /// A key never seen under `spec`, its window offset `offset` (0 but
    /// under [`Anchor::KeyOffset`]).
    pub fn new(spec: Spec, offset: u64) -> Self {
        Self {
            spec,
            offset,
            st: St::new(spec),
            banned_until: None,
            ban_on_denial: None,
        }
    }

    /// The key under a ban policy of `d` ns without escalation (the
    /// contract's "Bans"): a check denied with `remaining` 0 and a wait
    /// bans it for `d`, and answers the ban's denial.
    pub fn ban_on_denial(mut self, d: u64) -> Self {
        self.ban_on_denial = Some(d);
        self
    }

    /// Decides a request of cost `n` at `t`: a ban standing at `t` denies
    /// any positive cost (its wait the ban's time left); a peek reports
    /// the state.
    pub fn check(&mut self, n: u64, t: u64) -> Out {
        self.decide(n, t).0
    }

    /// [`check`](Self::check), and whether its answer is a ban's.
    pub fn decide(&mut self, n: u64, t: u64) -> (Out, bool) {
        let banned = |until: u64| Out {
            allowed: false,
            remaining: 0,
            wait: Some(u128::from(until - t)),
        };
        match self.banned_until {
            Some(until) if n > 0 && t < until => (banned(until), true),
            _ => {
                let out = self.st.check(self.spec, self.offset, n, t);
                match self.ban_on_denial {
                    Some(d) if !out.allowed && out.remaining == 0 && out.wait.is_some() => {
                        let until = t.saturating_add(d);
                        self.banned_until = Some(until);
                        (banned(until), true)
                    }
                    _ => (out, false),
                }
            }
        }
    }

    /// Gives back `n` admitted at `admitted_at`, at `t` (an `admitted_at`
    /// later than `t` is read as `t`). Panics for the fixed window's
    /// first-request anchor (the stores differ there) and the sliding log.
    pub fn refund(&mut self, n: u64, admitted_at: u64, t: u64) {
        let a = u128::from(admitted_at.min(t));
        self.st
            .refund(self.spec, self.offset, u128::from(n), a, u128::from(t));
    }

    /// Settles a request admitted at `admitted_at` with `reserved` to its
    /// `actual` cost, at `t` (the contract's "Settlement and debt"):
    /// charges the difference up, into debt (at most the burst owed), or
    /// refunds it down; answers a peek's decision. GCRA and the token
    /// bucket only (panics otherwise).
    pub fn settle(&mut self, reserved: u64, actual: u64, admitted_at: u64, t: u64) -> Out {
        if actual < reserved {
            self.refund(reserved - actual, admitted_at, t);
        } else if actual > reserved {
            let (
                Spec::Gcra {
                    limit,
                    period,
                    burst,
                },
                St::Tat(stored),
            ) = (self.spec, &mut self.st)
            else {
                panic!("the model settles GCRA and the token bucket only")
            };
            let (tee, t) = (u128::from(period), u128::from(t) * u128::from(limit));
            let used = stored.map_or(0, |s| s.saturating_sub(t));
            let cap = (2 * u128::from(burst) * tee).max(used);
            let new = (used + u128::from(actual - reserved) * tee).min(cap);
            *stored = Some(t + new);
        }
        self.st.check(self.spec, self.offset, 0, t)
    }

    /// Whether a ban stands at `t`.
    pub fn is_banned(&self, t: u64) -> bool {
        self.banned_until.is_some_and(|until| t < until)
    }

    /// Forgets the key's state (a ban stands).
    pub fn reset(&mut self) {
        self.st = St::new(self.spec);
    }

    /// Bans the key for `d` ns from `t` (replacing a ban standing).
    pub fn ban(&mut self, d: u64, t: u64) {
        self.banned_until = Some(t.saturating_add(d));
    }

    /// Lifts the key's ban, if any.
    pub fn unban(&mut self) {
        self.banned_until = None;
    }
}

impl St {
    /// The contract's refund of `n` admitted at `a`, at `t`.
    fn refund(&mut self, spec: Spec, offset: u64, n: u128, a: u128, t: u128) {
        match (spec, self) {
            (
                Spec::Gcra {
                    limit,
                    period,
                    burst,
                },
                St::Tat(Some(tat)),
            ) => {
                let t = t * u128::from(limit);
                let back = n.min(u128::from(burst)) * u128::from(period);
                if *tat > t {
                    *tat = tat.saturating_sub(back).max(t);
                }
            }
            (
                Spec::Leaky {
                    limit,
                    period,
                    queue,
                },
                St::Dep(Some(d)),
            ) => {
                let tee = i128::from(period);
                let floor = t as i128 * i128::from(limit) - tee;
                let back = n.min(u128::from(queue) + 1) as i128 * tee;
                *d = ((*d).max(floor) - back).max(floor);
            }
            (Spec::Fixed { period, .. }, St::Aligned { index, count }) => {
                let (p, o) = (i128::from(period), i128::from(offset));
                let k = floor_div_i(t as i128 - o, p);
                if *index == Some(k) && floor_div_i(a as i128 - o, p) == k {
                    *count -= n.min(*count);
                }
            }
            (Spec::Window { period, .. }, St::Window(windows)) => {
                let (k, ka) = (t / u128::from(period), a / u128::from(period));
                if ka + 1 >= k {
                    if let Some(c) = windows.get_mut(&ka) {
                        *c -= n.min(*c);
                    }
                }
            }
            (Spec::Fixed { .. } | Spec::Log { .. }, _) => {
                panic!("the model has no refund for this algorithm")
            }
            _ => {} // a key never admitted: nothing to give back
        }
    }

    /// Decides a request of cost `n` at `t` under `spec`, the key's window
    /// offset `offset`.
    fn check(&mut self, spec: Spec, offset: u64, n: u64, t: u64) -> Out {
        let (t, n) = (u128::from(t), u128::from(n));
        match (spec, self) {
            (
                Spec::Gcra {
                    limit,
                    period,
                    burst,
                },
                St::Tat(stored),
            ) => gcra(limit, period, burst, stored, t, n),
            (
                Spec::Leaky {
                    limit,
                    period,
                    queue,
                },
                St::Dep(stored),
            ) => leaky(limit, period, queue, stored, t, n),
            (Spec::Fixed { limit, period, .. }, St::Aligned { index, count }) => {
                let window = (u128::from(limit), u128::from(period), i128::from(offset));
                fixed_aligned(window, index, count, t, n)
            }
            (Spec::Fixed { limit, period, .. }, St::First { start, count }) => {
                fixed_first(u128::from(limit), u128::from(period), start, count, t, n)
            }
            (Spec::Log { limit, period }, St::Log(log)) => {
                sliding_log(u128::from(limit), u128::from(period), log, t, n)
            }
            (Spec::Window { limit, period }, St::Window(windows)) => {
                sliding_window(u128::from(limit), u128::from(period), windows, t, n)
            }
            _ => unreachable!("state matches its spec"),
        }
    }

    /// A new key's state under `spec`.
    fn new(spec: Spec) -> Self {
        match spec {
            Spec::Gcra { .. } => St::Tat(None),
            Spec::Leaky { .. } => St::Dep(None),
            Spec::Fixed {
                anchor: Anchor::FirstRequest,
                ..
            } => St::First {
                start: None,
                count: 0,
            },
            Spec::Fixed { .. } => St::Aligned {
                index: None,
                count: 0,
            },
            Spec::Log { .. } => St::Log(Vec::new()),
            Spec::Window { .. } => St::Window(BTreeMap::new()),
        }
    }
}

/// Fixed window, aligned or key-offset: `(L, P, o)` give the windows
/// `[k*P + o, (k+1)*P + o)`; `index` and `count` are the current one's.
fn fixed_aligned(
    (l, p, o): (u128, u128, i128),
    index: &mut Option<i128>,
    count: &mut u128,
    t: u128,
    n: u128,
) -> Out {
    let (p_i, t_i) = (p as i128, t as i128);
    let k = floor_div_i(t_i - o, p_i);
    if *index != Some(k) {
        *index = Some(k);
        *count = 0;
    }
    let end = (k + 1) * p_i + o;
    fixed(l, count, n, (end - t_i) as u128)
}

/// Fixed window, first-request: the open window started at `start` (none
/// open at first, or once `P` has passed) and holds `count`.
fn fixed_first(
    l: u128,
    p: u128,
    start: &mut Option<u128>,
    count: &mut u128,
    t: u128,
    n: u128,
) -> Out {
    if let Some(s) = *start {
        if t >= s + p {
            *start = None;
            *count = 0;
        }
    }
    let out = fixed(l, count, n, start.map_or(0, |s| s + p - t));
    if out.allowed && n > 0 && start.is_none() {
        *start = Some(t);
    }
    out
}

/// GCRA in units of `1 / L` ns: `T = P`, `t = t_ns * L`.
fn gcra(limit: u64, period: u64, burst: u64, stored: &mut Option<u128>, t: u128, n: u128) -> Out {
    let l = u128::from(limit);
    let tee = u128::from(period);
    let bt = u128::from(burst) * tee;
    let t = t * l;
    let tat = stored.map_or(t, |s| s.max(t));
    // In debt (a settlement's charge) nothing remains.
    let remaining = |tat: u128| (t + bt).saturating_sub(tat) / tee;
    if n == 0 {
        // A peek in debt is denied until the debt is repaid.
        let debt = tat.saturating_sub(t + bt);
        return Out {
            allowed: debt == 0,
            remaining: remaining(tat),
            wait: Some(ceil_div(debt, l)),
        };
    }
    if n > u128::from(burst) {
        return Out {
            allowed: false,
            remaining: remaining(tat),
            wait: None,
        };
    }
    let new = tat + n * tee;
    if new <= t + bt {
        *stored = Some(new);
        Out {
            allowed: true,
            remaining: remaining(new),
            wait: Some(0),
        }
    } else {
        Out {
            allowed: false,
            remaining: remaining(tat),
            wait: Some(ceil_div(new - bt - t, l)),
        }
    }
}

/// The leaky bucket in units of `1 / L` ns: `T = P`.
fn leaky(limit: u64, period: u64, queue: u64, stored: &mut Option<i128>, t: u128, n: u128) -> Out {
    let l = i128::from(limit);
    let tee = i128::from(period);
    let qt = i128::from(queue) * tee;
    let t = t as i128 * l;
    let d = stored.map_or(t - tee, |s| s.max(t - tee));
    let remaining = |d: i128| floor_div_i(qt + t - d, tee) as u128;
    let n_i = n as i128;
    if n == 0 {
        return Out {
            allowed: true,
            remaining: remaining(d),
            wait: Some(0),
        };
    }
    if n_i - 1 > i128::from(queue) {
        return Out {
            allowed: false,
            remaining: remaining(d),
            wait: None,
        };
    }
    let start = d + tee;
    let last = start + (n_i - 1) * tee;
    if last - t <= qt {
        *stored = Some(last);
        Out {
            allowed: true,
            remaining: remaining(last),
            wait: Some(ceil_div((start - t) as u128, l as u128)),
        }
    } else {
        Out {
            allowed: false,
            remaining: remaining(d),
            wait: Some(ceil_div((last - qt - t) as u128, l as u128)),
        }
    }
}

/// The fixed-window rule, given the current window's count and the time
/// left to its end.
fn fixed(l: u128, count: &mut u128, n: u128, to_end: u128) -> Out {
    if n == 0 {
        return Out {
            allowed: true,
            remaining: l - *count,
            wait: Some(0),
        };
    }
    if n > l {
        return Out {
            allowed: false,
            remaining: l - *count,
            wait: None,
        };
    }
    if *count + n <= l {
        *count += n;
        Out {
            allowed: true,
            remaining: l - *count,
            wait: Some(0),
        }
    } else {
        Out {
            allowed: false,
            remaining: l - *count,
            wait: Some(to_end),
        }
    }
}

fn sliding_log(l: u128, p: u128, log: &mut Vec<(u128, u128)>, t: u128, n: u128) -> Out {
    // An entry at s counts at t iff s > t - P, i.e. s + P > t.
    log.retain(|&(s, _)| s + p > t);
    let used: u128 = log.iter().map(|&(_, c)| c).sum();
    if n == 0 {
        return Out {
            allowed: true,
            remaining: l - used,
            wait: Some(0),
        };
    }
    if n > l {
        return Out {
            allowed: false,
            remaining: l - used,
            wait: None,
        };
    }
    if used + n <= l {
        log.push((t, n));
        return Out {
            allowed: true,
            remaining: l - used - n,
            wait: Some(0),
        };
    }
    let mut left = used;
    let mut wait = None;
    for &(s, c) in log.iter() {
        left -= c;
        if left + n <= l {
            wait = Some(s + p - t);
            break;
        }
    }
    Out {
        allowed: false,
        remaining: l - used,
        wait: Some(wait.expect("dropping every entry makes room")),
    }
}

fn sliding_window(l: u128, p: u128, windows: &mut BTreeMap<u128, u128>, t: u128, n: u128) -> Out {
    let k = t / p;
    let e = t - k * p;
    let cur = windows.get(&k).copied().unwrap_or(0);
    let prev = if k == 0 {
        0
    } else {
        windows.get(&(k - 1)).copied().unwrap_or(0)
    };
    // remaining = max(0, floor(L - cur - prev*(P - e)/P)), as
    // floor(((L - cur)*P - prev*(P - e)) / P) when that is not negative.
    let remaining = |cur: u128| {
        let a = (l - cur) * p;
        let b = prev * (p - e);
        if a > b {
            (a - b) / p
        } else {
            0
        }
    };
    if n == 0 {
        return Out {
            allowed: true,
            remaining: remaining(cur),
            wait: Some(0),
        };
    }
    if n > l {
        return Out {
            allowed: false,
            remaining: remaining(cur),
            wait: None,
        };
    }
    // Admit iff prev*(P - e) + (cur + n)*P <= L*P; cur + n <= 2L and
    // the products may pass u128, so compare without overflowing.
    let fits = (cur + n <= l)
        && prev
            .checked_mul(p - e)
            .is_some_and(|x| x <= (l - cur - n) * p);
    if fits {
        windows.insert(k, cur + n);
        // Old windows never matter again.
        windows.retain(|&w, _| w + 1 >= k);
        return Out {
            allowed: true,
            remaining: remaining(cur + n),
            wait: Some(0),
        };
    }
    Out {
        allowed: false,
        remaining: remaining(cur),
        wait: Some(sliding_window_wait(l, p, e, cur, prev, n)),
    }
}

/// The sliding window's wait for a denied cost `n`, `e` into the current
/// window of count `cur`, after a previous window of count `prev`.
fn sliding_window_wait(l: u128, p: u128, e: u128, cur: u128, prev: u128, n: u128) -> u128 {
    if cur + n <= l {
        // room >= 0: wait = (P - e) - room*P/prev, the exact value rounded
        // up, i.e. (P - e) - floor(room*P/prev).
        let room = l - cur - n;
        (p - e) - room * p / prev
    } else {
        // room < 0: wait = (P - e) + max(0, P - (L - n)*P/cur).
        (p - e) + p.saturating_sub((l - n) * p / cur)
    }
}
