//! The HTTP API: `POST /check` (JSON), `GET /check` (forward auth), `/ready`, `/health`.

use crate::check::{check_all, Hit, Outcome};
use crate::forward_key::forward_key;
use crate::http_json::{error, hit_by_name, outcome_answer, with_fields, ApiError, EntryJson};
use crate::key_ops::stores_answer;
use crate::settle::{settle_post, SettleBody};
use crate::state::State;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State as Extract};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the HTTP handlers share: the server's state, and whether it is
/// ready (false once it is stopping).
///
/// ```
/// use ratelimit_server::{http_api::HttpState, Config, State};
/// use std::sync::{atomic::AtomicBool, atomic::Ordering, Arc};
///
/// let state = Arc::new(State::new(&Config::parse("", "inline", |_| None).unwrap()).unwrap());
/// let shared = HttpState { state, ready: AtomicBool::new(true) };
/// // Stopping: `GET /ready` answers 503 from now on.
/// shared.ready.store(false, Ordering::Relaxed);
/// assert_eq!(shared.state.limits().all().count(), 0);
/// ```
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
/// let state = Arc::new(State::new(&Config::parse("", "inline", |_| None).unwrap()).unwrap());
/// let shared = Arc::new(http_api::HttpState { state, ready: AtomicBool::new(true) });
/// let _router = http_api::router(shared);
/// ```
pub fn router(shared: Arc<HttpState>) -> Router {
    Router::new()
        .route("/check", get(check_get).post(check_post))
        .route("/settle", post(settle))
        .route("/ready", get(ready))
        .route("/health", get(|| async { "ok\n" }))
        .with_state(shared)
}

/// `POST /settle`, on the server's state (see [`settle_post`]).
async fn settle(
    Extract(shared): Extract<Arc<HttpState>>,
    body: Result<Json<SettleBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    settle_post(&shared.state, body).await
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

/// 200 while serving with stores that answer; 503 once stopping, or
/// while a shared store (Redis) fails, naming the limit.
async fn ready(Extract(shared): Extract<Arc<HttpState>>) -> Response {
    if !shared.ready.load(Ordering::Acquire) {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response();
    }
    let state = &shared.state;
    let limits = Arc::clone(&state.limits());
    match stores_answer(&limits, state.stores_shared(), state.now()).await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("a store does not answer: {e}\n"),
        )
            .into_response(),
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
            if domain.is_empty() {
                return bad("domain must not be empty");
            }
            if let Some(why) = crate::request_bounds::refused(descriptors.iter().map(Vec::len)) {
                return Err(error(StatusCode::BAD_REQUEST, why));
            }
            // As in the gRPC protocol: 0 or unset means 1.
            let cost = hits_addend.unwrap_or(1).max(1);
            let limits = state.limits();
            let plan = state.request_plan(|| descriptors.iter().flatten().map(EntryJson::pair));
            descriptors
                .iter()
                .map(|d| {
                    Hit::resolve(&limits, &domain, &EntryJson::entries(d), cost, plan)
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

/// The outcome of `hits` at `now`, or a 503 for a store that failed.
async fn decide(hits: &[Hit], now: u64) -> Result<Outcome, ApiError> {
    let started = std::time::Instant::now();
    let outcome = check_all(hits, now).await.map_err(|e| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store failed: {e}"),
        )
    })?;
    crate::metrics::check_took("http", started.elapsed());
    Ok(outcome)
}

async fn check_post(
    Extract(shared): Extract<Arc<HttpState>>,
    body: Result<Json<CheckBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let state = &shared.state;
    let hits = hits_of(state, body)?;
    let now = state.now();
    let outcome = decide(&hits, now).await?;
    let status = if outcome.over {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    Ok(outcome_answer(&outcome, now, status))
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
    parts: http::request::Parts,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let state = &shared.state;
    let Some(rule) = state.limits().named(&query.limit).cloned() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no limit named {:?}", query.limit),
        ));
    };
    let client_ip = state.client_ip();
    let key = forward_key(&rule, client_ip.as_deref(), &parts)
        .map_err(|m| error(StatusCode::BAD_REQUEST, m))?;
    let hit = hit_by_name(state, &query.limit, key, 1)?;
    let outcome = decide(&[hit], state.now()).await?;
    let status = if !outcome.over {
        StatusCode::NO_CONTENT
    } else if state.settings().refuse_status == 403 {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    Ok(with_fields(status.into_response(), &outcome))
}
