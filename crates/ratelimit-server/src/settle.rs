//! `POST /settle`: a cost known after the response (tokens, bytes) charged or given back.

use crate::check::{Hit, Outcome, Status};
use crate::http_json::{error, hit_by_name, outcome_answer, ApiError, EntryJson};
use crate::rule::LOG_STORE;
use crate::state::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use ratelimit_core::Store;
use serde::Deserialize;

/// How far past the server's clock `admitted_at` may be (another
/// instance's clock): later is an error.
const SKEW_NS: u64 = 60_000_000_000;

/// `POST /settle`'s body: `limit` and `key`, or `domain` and one
/// `descriptor`; what was reserved, the actual cost, and when the
/// reservation was admitted (`POST /check`'s `at`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettleBody {
    limit: Option<String>,
    key: Option<String>,
    domain: Option<String>,
    descriptor: Option<Vec<EntryJson>>,
    reserved: u64,
    actual: u64,
    admitted_at: u64,
}

/// The hit a settlement names, or a 4xx naming the fault.
fn hit_of(state: &State, body: SettleBody) -> Result<Hit, ApiError> {
    let bad = |m: &str| Err(error(StatusCode::BAD_REQUEST, m));
    match body {
        SettleBody {
            limit: Some(limit),
            key: Some(key),
            domain: None,
            descriptor: None,
            reserved,
            ..
        } => hit_by_name(state, &limit, key, reserved),
        SettleBody {
            limit: None,
            key: None,
            domain: Some(domain),
            descriptor: Some(descriptor),
            reserved,
            ..
        } => {
            if domain.is_empty() || descriptor.is_empty() {
                return bad("domain and descriptor must not be empty");
            }
            if let Some(why) = crate::request_bounds::refused([descriptor.len()].into_iter()) {
                return Err(error(StatusCode::BAD_REQUEST, why));
            }
            let entries = EntryJson::entries(&descriptor);
            let plan = state.request_plan(|| entries.iter().copied());
            Hit::resolve(&state.limits(), &domain, &entries, reserved, plan)
                .map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
        }
        _ => bad("give either limit and key, or domain and descriptor"),
    }
}

/// Settles the reservation: `actual` above `reserved` charges the
/// difference (the key may go into debt), below it gives the difference
/// back. Answers 200 with what a check of cost 0 tells after it:
/// `allowed` false while the key is in debt, with `Retry-After`.
pub(crate) async fn settle_post(
    state: &State,
    body: Result<Json<SettleBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let now = state.now();
    if body.admitted_at > now.saturating_add(SKEW_NS) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "admitted_at is in the future: give POST /check's `at` (Unix nanoseconds)",
        ));
    }
    let (actual, admitted_at) = (body.actual, body.admitted_at.min(now));
    let hit = hit_of(state, body)?;
    let status = match hit
        .rule
        .as_deref()
        .and_then(|r| Some((r, r.store.as_ref()?)))
    {
        None => Status {
            rule: hit.rule.clone(),
            decision: None,
            over: false,
            shadow_over: false,
        },
        Some((rule, store)) => {
            let settled = store.settle(&hit.key, hit.cost, actual, admitted_at, now);
            let decision = settled.await.map_err(|e| {
                if let Some(held) = rule.logs.admit(LOG_STORE, now) {
                    tracing::warn!(limit = %rule.config.name, error = %e, held_back = held, "store failed: the settlement is answered as an error");
                }
                error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the store failed: {e}"),
                )
            })?;
            Status::of(&hit, decision, now)
        }
    };
    let outcome = Outcome {
        over: status.over,
        statuses: vec![status],
    };
    Ok(outcome_answer(&outcome, now, StatusCode::OK))
}
