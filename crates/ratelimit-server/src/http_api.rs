//! The HTTP API: `POST /check` (JSON), `GET /check` (forward auth), `/ready`, `/health`.

use crate::check::{check_all, Hit, Outcome, Status};
use crate::headers::fields;
use crate::state::State;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State as Extract};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ratelimit_core::ceil_secs;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the HTTP handlers share: the server's state, and whether it is
/// ready (false once it is stopping).
#[derive(Debug)]
pub struct HttpState {
    /// The server's state.
    pub state: Arc<State>,
    /// `GET /ready` answers 200 while true, 503 after.
    pub ready: AtomicBool,
}

/// The HTTP API's router.
///
/// ```
/// use ratelimit_server::{http_api, Config, State};
/// use std::sync::{atomic::AtomicBool, Arc};
///
/// let state = Arc::new(State::new(&Config::parse("", "inline").unwrap()).unwrap());
/// let shared = Arc::new(http_api::HttpState { state, ready: AtomicBool::new(true) });
/// let _router = http_api::router(shared);
/// ```
pub fn router(shared: Arc<HttpState>) -> Router {
    Router::new()
        .route("/check", get(check_get).post(check_post))
        .route("/ready", get(ready))
        .route("/health", get(|| async { "ok\n" }))
        .with_state(shared)
}

/// One descriptor entry of `POST /check`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryJson {
    key: String,
    value: String,
}

/// `POST /check`'s body: `domain` and `descriptors` (and `hits_addend`),
/// or `limit` and `key` (and `cost`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckBody {
    domain: Option<String>,
    descriptors: Option<Vec<Vec<EntryJson>>>,
    hits_addend: Option<u64>,
    limit: Option<String>,
    key: Option<String>,
    cost: Option<u64>,
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
}

#[derive(Debug, Serialize)]
struct OutcomeJson {
    allowed: bool,
    overall_code: &'static str,
    statuses: Vec<StatusJson>,
}

/// A refusal of a call: its status and what is wrong, answered as
/// `{"error": message}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

fn error(status: StatusCode, message: impl Into<String>) -> ApiError {
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

async fn ready(Extract(shared): Extract<Arc<HttpState>>) -> Response {
    if shared.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response()
    }
}

/// The hits of a `POST /check` body, or a 4xx naming the fault.
fn hits_of(state: &State, body: CheckBody) -> Result<Vec<Hit>, ApiError> {
    let bad = |m: &str| Err(error(StatusCode::BAD_REQUEST, m));
    match body {
        CheckBody {
            domain: Some(domain),
            descriptors: Some(descriptors),
            hits_addend,
            limit: None,
            key: None,
            cost: None,
        } => {
            if domain.is_empty() || descriptors.is_empty() {
                return bad("domain and descriptors must not be empty");
            }
            if descriptors.iter().any(Vec::is_empty) {
                return bad("a descriptor has no entries");
            }
            // As in the gRPC protocol: 0 or unset means 1.
            let cost = hits_addend.unwrap_or(1).max(1);
            descriptors
                .iter()
                .map(|d| {
                    let entries: Vec<(&str, &str)> = d
                        .iter()
                        .map(|e| (e.key.as_str(), e.value.as_str()))
                        .collect();
                    Hit::resolve(&state.limits, &domain, &entries, cost)
                        .map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
                })
                .collect()
        }
        CheckBody {
            domain: None,
            descriptors: None,
            hits_addend: None,
            limit: Some(limit),
            key: Some(key),
            cost,
        } => Ok(vec![hit_by_name(state, &limit, key, cost.unwrap_or(1))?]),
        _ => {
            bad("give either domain and descriptors (and hits_addend), or limit and key (and cost)")
        }
    }
}

/// The hit of `key` on the limit named `limit`.
fn hit_by_name(state: &State, limit: &str, key: String, cost: u64) -> Result<Hit, ApiError> {
    let Some(rule) = state.limits.named(limit) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no limit named {limit:?}"),
        ));
    };
    if rule.varying() != 1 {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "limit {limit:?} has {} entries that take any value: check it by domain and descriptors",
                rule.varying()
            ),
        ));
    }
    Hit::of(rule, key, cost).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
}

async fn decide(state: &State, hits: &[Hit]) -> Result<Outcome, ApiError> {
    check_all(hits, state.now()).await.map_err(|e| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store failed: {e}"),
        )
    })
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
    }
}

/// `outcome`'s header fields on `response`.
fn with_fields(mut response: Response, outcome: &Outcome) -> Response {
    for (name, value) in fields(outcome) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
    response
}

async fn check_post(
    Extract(shared): Extract<Arc<HttpState>>,
    body: Result<Json<CheckBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let state = &shared.state;
    let hits = hits_of(state, body)?;
    let outcome = decide(state, &hits).await?;
    let json = OutcomeJson {
        allowed: !outcome.over,
        overall_code: if outcome.over { "OVER_LIMIT" } else { "OK" },
        statuses: outcome.statuses.iter().map(status_json).collect(),
    };
    let status = if outcome.over {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    Ok(with_fields((status, Json(json)).into_response(), &outcome))
}

/// `GET /check`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckQuery {
    limit: String,
}

async fn check_get(
    Extract(shared): Extract<Arc<HttpState>>,
    query: Result<Query<CheckQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let state = &shared.state;
    let Some(rule) = state.limits.named(&query.limit) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no limit named {:?}", query.limit),
        ));
    };
    let header = &rule.config.key_header;
    let key = match headers.get(header).map(HeaderValue::to_str) {
        Some(Ok(key)) if !key.is_empty() => key.to_owned(),
        _ => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("no {header} header: limit {:?} keys on it", query.limit),
            ))
        }
    };
    let hit = hit_by_name(state, &query.limit, key, 1)?;
    let outcome = decide(state, &[hit]).await?;
    let status = if !outcome.over {
        StatusCode::NO_CONTENT
    } else if state.settings.refuse_status == 403 {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    Ok(with_fields(status.into_response(), &outcome))
}
