//! Carry-over of a key's state from one algorithm's settings to
//! another's, keeping the quota used (`LiveAlgorithm`).
//!
//! The rule: a change frees nothing. The quota a key has used at the
//! change (`L - remaining` in whole requests, rounded up, and beyond `L`
//! if it was over it) is still used under the new settings, which free it
//! at their own pace from then on. Nothing is capped at the new limit, so
//! a limit lowered and raised again gives nothing back.

use super::{Algorithm, AnyGcra, AnyLeakyBucket, AnyState, AnyTokenBucket};
use crate::{AnyAlgorithm, Gcra, LeakyBucket, SlidingLog, TokenBucket};
use AnyAlgorithm as A;

/// `a` in the 16-byte state, where it has one (so that no state wraps in
/// a lifetime, and an overshoot fits).
pub(crate) fn widen(a: AnyAlgorithm) -> AnyAlgorithm {
    let wide = match a {
        AnyAlgorithm::Gcra(AnyGcra::Narrow(g)) => {
            Gcra::with_burst_wide(g.rate_limit(), g.period(), g.burst()).map(Into::into)
        }
        AnyAlgorithm::TokenBucket(t) if !t.is_wide() => {
            TokenBucket::new_wide(t.capacity(), t.refill(), t.period()).map(Into::into)
        }
        AnyAlgorithm::LeakyBucket(AnyLeakyBucket::Narrow(l)) => {
            LeakyBucket::new_wide(l.rate_limit(), l.period(), l.queue()).map(Into::into)
        }
        other => Ok(other),
    };
    wide.unwrap_or(a)
}

/// The GCRA of a GCRA or a token bucket, in the 16-byte state.
fn wide_gcra(a: &AnyAlgorithm) -> Option<&Gcra<u128>> {
    match a {
        AnyAlgorithm::Gcra(AnyGcra::Wide(g))
        | AnyAlgorithm::TokenBucket(AnyTokenBucket {
            gcra: AnyGcra::Wide(g),
        }) => Some(g),
        _ => None,
    }
}

/// A fresh state of `a` for the key hashed `hash`.
pub(crate) fn fresh(a: &AnyAlgorithm, hash: u64, now: u64) -> AnyState {
    match a {
        AnyAlgorithm::FixedWindow(w) => AnyState::Window(w.fresh_hashed(hash, now)),
        other => other.fresh(&(), now),
    }
}

/// The quota `state` (of `a`) has used at `now`, in whole requests,
/// rounded up, beyond `a`'s limit for an overshoot.
pub(crate) fn used(a: &AnyAlgorithm, state: AnyState, now: u64) -> u64 {
    let whole =
        |(units, step): (u128, u128)| u64::try_from(units.div_ceil(step)).unwrap_or(u64::MAX);
    match (a, state) {
        (A::LeakyBucket(AnyLeakyBucket::Wide(l)), AnyState::Wide(s)) => whole(l.used(&s, now)),
        (A::FixedWindow(w), AnyState::Window(s)) => w.used_at(s, now),
        (A::SlidingLog(l), AnyState::Log(s)) => l.used_at(s, now),
        (A::SlidingWindow(w), AnyState::Sliding(s)) => w.used_at(s, now),
        (a, state) => match (wide_gcra(a), state) {
            (Some(g), AnyState::Wide(s)) => whole(g.used(&s, now)),
            // A narrow state (a setting the 16-byte state refused, which
            // the 8-byte one then cannot hold either): what a peek tells.
            (_, mut s) => {
                let d = a.check(&mut s, 0, now);
                d.limit - d.remaining
            }
        },
    }
}

/// A state of `a` at `now` with `used` whole requests charged, beyond its
/// limit if so.
pub(crate) fn charged(a: &AnyAlgorithm, hash: u64, used: u64, now: u64) -> AnyState {
    let units = |step: u128| u128::from(used).saturating_mul(step);
    match a {
        A::LeakyBucket(AnyLeakyBucket::Wide(l)) => {
            AnyState::Wide(l.with_used(units(l.step()), now))
        }
        A::FixedWindow(w) => AnyState::Window(w.charged(hash, used, now)),
        A::SlidingLog(_) => AnyState::Log(SlidingLog::charged(used, now)),
        A::SlidingWindow(w) => AnyState::Sliding(w.charged(used, now)),
        a => match wide_gcra(a) {
            Some(g) => AnyState::Wide(g.with_used(units(g.step()), now)),
            None => {
                let mut s = fresh(a, hash, now);
                a.check(&mut s, used.min(a.limit()), now);
                s
            }
        },
    }
}

/// `used` scaled units of a step `from` in units of a step `to`, rounded
/// up (a client never gains quota by a change).
fn rescale(used: u128, from: u128, to: u128) -> u128 {
    match used.checked_mul(to) {
        Some(p) => p.div_ceil(from),
        None => used.div_ceil(from).saturating_mul(to),
    }
}

/// `state`, written under `old`, as a state of `new` at `now`: the same
/// kind keeps what it can of the state's shape (a log's entries, a
/// window's two counts, the used units rescaled exactly); any other pair
/// charges the quota used, in whole requests, at `now`.
pub(crate) fn carry(
    old: &AnyAlgorithm,
    new: &AnyAlgorithm,
    state: AnyState,
    hash: u64,
    now: u64,
) -> AnyState {
    if old == new {
        return state;
    }
    if let (Some(o), Some(n), AnyState::Wide(s)) = (wide_gcra(old), wide_gcra(new), &state) {
        let (used, step) = o.used(s, now);
        return AnyState::Wide(n.with_used(rescale(used, step, n.step()), now));
    }
    match (old, new, state) {
        (
            A::LeakyBucket(AnyLeakyBucket::Wide(o)),
            A::LeakyBucket(AnyLeakyBucket::Wide(n)),
            AnyState::Wide(s),
        ) => {
            let (used, step) = o.used(&s, now);
            AnyState::Wide(n.with_used(rescale(used, step, n.step()), now))
        }
        (A::FixedWindow(o), A::FixedWindow(n), AnyState::Window(s)) => {
            AnyState::Window(n.carry_from(o, s, hash, now))
        }
        (A::SlidingLog(o), A::SlidingLog(n), AnyState::Log(s)) => {
            AnyState::Log(n.carry_from(o, s, now))
        }
        (A::SlidingWindow(o), A::SlidingWindow(n), AnyState::Sliding(s)) => {
            AnyState::Sliding(n.carry_from(o, s, now))
        }
        (old, new, state) => charged(new, hash, used(old, state, now), now),
    }
}
