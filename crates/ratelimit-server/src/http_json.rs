//! The HTTP API's JSON: descriptor entries in; outcomes (with their header fields) and errors out.

use crate::check::{Hit, Outcome, Status};
use crate::headers::fields;
use crate::state::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratelimit_core::plumbing::ceil_secs;
use serde::{Deserialize, Serialize};

/// One descriptor entry of `POST /check` and `POST /settle`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntryJson {
    key: String,
    value: String,
}

impl EntryJson {
    /// The entry as a key and its value.
    pub(crate) fn pair(&self) -> (&str, &str) {
        (self.key.as_str(), self.value.as_str())
    }

    /// The entries of a descriptor, as [`Hit::resolve`] takes them.
    pub(crate) fn entries(descriptor: &[Self]) -> Vec<(&str, &str)> {
        descriptor.iter().map(Self::pair).collect()
    }
}

#[derive(Debug, Serialize)]
struct StatusJson {
    code: &'static str,
    limit: Option<String>,
    remaining: Option<u64>,
    quota: Option<u64>,
    window_secs: Option<u64>,
    reset_secs: Option<u64>,
    retry_after_secs: Option<u64>,
    /// This descriptor refused a request that can never be admitted: its
    /// cost is above the limit's capacity, so no wait helps.
    never_admissible: bool,
}

#[derive(Debug, Serialize)]
struct OutcomeJson {
    allowed: bool,
    overall_code: &'static str,
    statuses: Vec<StatusJson>,
    /// When it was decided (the stores' clock, Unix nanoseconds): a
    /// later `POST /settle`'s `admitted_at`.
    at: u64,
}

/// A refusal of a call: its status and what is wrong, answered as
/// `{"error": message}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

/// The refusal of a call with `status`, saying `message`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        message: message.into(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message });
        (self.status, Json(body)).into_response()
    }
}

/// The hit of `key` on the limit named `limit`: 404 for no such limit,
/// 400 for a limit that does not key on one value or a key too long.
/// Its plan is that of the limit's descriptor with `key` as the value of
/// its entry without a fixed value; a limit scoped to another plan
/// matches nothing (the hit is admitted, nothing counted).
pub(crate) fn hit_by_name(
    state: &State,
    limit: &str,
    key: String,
    cost: u64,
) -> Result<Hit, ApiError> {
    let limits = state.limits();
    let Some(rule) = limits.named(limit) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no limit named {limit:?}"),
        ));
    };
    if rule.varying() != 1 {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "limit {limit:?} has {} entries that take any value: name it by domain and descriptors",
                rule.varying()
            ),
        ));
    }
    let entries = || {
        let pattern = rule.config.entries.iter();
        pattern.map(|p| (p.key.as_str(), p.value.as_deref().unwrap_or(&key)))
    };
    if !rule.takes(state.request_plan(entries)) {
        return Ok(Hit {
            rule: None,
            key: String::new(),
            cost,
        });
    }
    Hit::of(rule, key, cost).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
}

fn status_json(s: &Status) -> StatusJson {
    let d = s.decision;
    StatusJson {
        code: if s.over { "OVER_LIMIT" } else { "OK" },
        limit: s.rule.as_ref().map(|r| r.config.name.clone()),
        remaining: d.map(|d| d.remaining),
        quota: d.map(|d| d.limit),
        window_secs: d.map(|d| ceil_secs(d.window)),
        reset_secs: d.map(|d| ceil_secs(d.reset)),
        retry_after_secs: d
            .filter(|_| s.over)
            .and_then(|d| d.retry_after())
            .map(ceil_secs),
        never_admissible: s.over && d.is_some_and(|d| d.is_never()),
    }
}

/// `outcome`'s header fields on `response`.
pub(crate) fn with_fields(mut response: Response, outcome: &Outcome) -> Response {
    for (name, value) in fields(outcome) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
    response
}

/// `outcome`, decided `at`, as JSON with its header fields, with `status`.
pub(crate) fn outcome_answer(outcome: &Outcome, at: u64, status: StatusCode) -> Response {
    let json = OutcomeJson {
        allowed: !outcome.over,
        overall_code: if outcome.over { "OVER_LIMIT" } else { "OK" },
        statuses: outcome.statuses.iter().map(status_json).collect(),
        at,
    };
    with_fields((status, Json(json)).into_response(), outcome)
}
