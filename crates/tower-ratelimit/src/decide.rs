//! What a checked request gets: its [`Refusal`] (rendered by `render.rs`), or the [`Forward`] of an admitted (or dry-run) request.

use crate::check::{Spent, Verdict};
use crate::future::HeaderPlan;
use crate::info::{LimitDecision, RateLimitInfo};
use crate::key::KeyExtractor;
use crate::observe;
use crate::reserve::{Forward, Reserved};
use crate::shared::Shared;
use crate::strategy::Mode;
use http::request::Parts;
use ratelimit_core::{Decision, StoreError};
use smallvec::SmallVec;
use std::time::Duration;

/// What to do with a checked request.
#[allow(clippy::large_enum_variant)] // Transient, moved once.
pub(crate) enum Next<K> {
    /// Answer it with a rejection.
    Refuse(Refusal),
    /// Call the inner service.
    Forward(Forward<K>),
}

/// Why a checked request is refused: the data its response is rendered
/// from.
pub(crate) enum Refusal {
    /// A limit denied it, as the info says.
    Limited(RateLimitInfo),
    /// A store failed, and the policy is fail-closed.
    Unavailable(StoreError),
}

/// What to do with a request whose limits in `checked` (limit index,
/// decision) gave `verdict`. A forwarded request gets its
/// [`RateLimitInfo`] in `parts`.
#[inline]
pub(crate) fn decide<X, St, R>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    spent: Spent<X::Key>,
    checked: &[(usize, Decision)],
    verdict: Verdict,
) -> Next<X::Key>
where
    X: KeyExtractor,
{
    let entry = |&(i, decision): &(usize, Decision)| LimitDecision {
        name: shared.limits[i].name,
        decision,
    };
    let entries: SmallVec<[LimitDecision; 1]> = match checked {
        [one] => SmallVec::from_buf([entry(one)]),
        _ => checked.iter().map(entry).collect(),
    };
    match verdict {
        Verdict::Unavailable(e) => Next::Refuse(Refusal::Unavailable(e)),
        Verdict::Denied => denied(shared, parts, spent.now, checked, entries),
        Verdict::Admitted => Next::Forward(admit(shared, parts, spent, checked, entries)),
    }
}

/// The last entry denied: the refusal, or in dry-run mode the request
/// forwarded with the denial in its info, reserving nothing.
#[inline]
fn denied<X, St, R>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    now: u64,
    checked: &[(usize, Decision)],
    entries: SmallVec<[LimitDecision; 1]>,
) -> Next<X::Key>
where
    X: KeyExtractor,
{
    let dry_run = shared.mode == Mode::DryRun;
    let i = entries.len() - 1;
    let denied = &entries[i];
    let summary = shared.limits[checked[i].0].summary;
    observe::limited(denied.name, &denied.decision, dry_run, summary, now);
    let info = RateLimitInfo {
        entries,
        denied: Some(i),
        dry_run,
    };
    if dry_run {
        return Next::Forward(forward(shared, parts, checked, info, Duration::ZERO, None));
    }
    Next::Refuse(Refusal::Limited(info))
}

/// Every limit admitted: the forwarding, with its hold (shape mode) and
/// what it reserves when a response, a drop or a settlement may give the
/// cost back.
#[inline]
fn admit<X, St, R>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    spent: Spent<X::Key>,
    checked: &[(usize, Decision)],
    entries: SmallVec<[LimitDecision; 1]>,
) -> Forward<X::Key>
where
    X: KeyExtractor,
{
    for e in &entries {
        observe::allowed(e.name);
    }
    let mut hold = Duration::ZERO;
    if shared.mode == Mode::Shape {
        hold = entries
            .iter()
            .map(|e| e.decision.hold())
            .max()
            .unwrap_or_default();
    }
    let refundable =
        shared.count_if.is_some() || shared.reset_if.is_some() || shared.refund_on_inner_limit;
    let settles = shared.settle.is_some();
    let Spent { key, cost, now } = spent;
    let reserved =
        ((refundable || settles || !hold.is_zero()) && (cost > 0 || settles)).then(|| Reserved {
            limits: checked
                .iter()
                .filter(|(_, d)| d.allowed)
                .map(|&(i, _)| i)
                .collect(),
            key,
            cost,
            at: now,
        });
    let info = RateLimitInfo {
        entries,
        denied: None,
        dry_run: false,
    };
    forward(shared, parts, checked, info, hold, reserved)
}

/// A forwarding: `info` into the request's extensions, and the fields for
/// the response.
#[inline]
fn forward<X, St, R>(
    shared: &Shared<X, St, R>,
    parts: &mut Parts,
    checked: &[(usize, Decision)],
    info: RateLimitInfo,
    hold: Duration,
    reserved: Option<Reserved<X::Key>>,
) -> Forward<X::Key>
where
    X: KeyExtractor,
{
    let plan = HeaderPlan::allowed(&shared.fields, checked);
    info.merge_owned(&mut parts.extensions);
    Forward {
        plan,
        hold,
        reserved,
    }
}
