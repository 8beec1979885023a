//! The admin API's plans (tower-ratelimit's [`PlanDirectory`]: one
//! implementation with the library's): each plan's members counted, and
//! keys moved between plans, shared through Redis when the store is
//! there.
//!
//! [`PlanDirectory`]: tower_ratelimit::policy::PlanDirectory

use crate::check::MAX_KEY_BYTES;
use crate::http_json::{error, ApiError};
use crate::state::State;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State as Extract};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Json;
use serde_json::json;
use std::sync::Arc;

/// `GET /plans`.
pub(crate) fn list<S>() -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<State>: axum::extract::FromRef<S>,
{
    axum::routing::get(plans)
}

/// `PUT` and `DELETE /plans/{plan}/keys/{key}`.
pub(crate) fn keys<S>() -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<State>: axum::extract::FromRef<S>,
{
    axum::routing::put(move_in).delete(move_out)
}

/// Each plan with its members counted: no key is shown.
async fn plans(Extract(state): Extract<Arc<State>>) -> Response {
    let plans = state.plans().members();
    Json(json!({ "plans": plans })).into_response()
}

/// The plan and key of a request's path: 404 for no such plan, 400 for
/// a key of no length or too long.
fn plan_key(
    state: &State,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((plan, key)) = path.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    if !state.plans().plans().iter().any(|p| p.name == plan) {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no plan named {plan:?}"),
        ));
    }
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        let message = format!(
            "a key of {} bytes: expected 1 to {MAX_KEY_BYTES}",
            key.len()
        );
        return Err(error(StatusCode::BAD_REQUEST, message));
    }
    Ok((plan, key))
}

/// A move refused: Redis that failed (503, as the library's admin API
/// answers it), or a key or plan that cannot take it (400).
fn refused(message: String) -> ApiError {
    let status = if message.starts_with("redis failed") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_REQUEST
    };
    error(status, message)
}

/// How a key is logged: by its length only (it may be a credential).
fn shown(key: &str) -> String {
    format!("({} bytes, not logged)", key.len())
}

async fn move_in(
    Extract(state): Extract<Arc<State>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (plan, key) = plan_key(&state, path)?;
    state
        .plans()
        .move_to_plan(&plan, &key)
        .await
        .map_err(refused)?;
    tracing::info!(plan = %plan, key = %shown(&key), "admin: key moved into a plan");
    Ok(Json(json!({ "plan": plan, "moved": true })).into_response())
}

async fn move_out(
    Extract(state): Extract<Arc<State>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (plan, key) = plan_key(&state, path)?;
    let removed = state.plans().remove_from_plan(&plan, &key).await;
    match removed.map_err(refused)? {
        Some(now) => {
            tracing::info!(plan = %plan, key = %shown(&key), now = %now, "admin: key taken out of a plan");
            Ok(Json(json!({ "plan": plan, "removed": true, "now": now })).into_response())
        }
        None => Err(error(
            StatusCode::NOT_FOUND,
            format!("the key is not in plan {plan:?}"),
        )),
    }
}
