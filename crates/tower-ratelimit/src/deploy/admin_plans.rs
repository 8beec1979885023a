//! The admin API's plans: each plan's members counted, and keys moved
//! between plans, shared through Redis when the limits are there (into
//! any plan, `shared = true` or not); each move's answer says whether it
//! is (`"shared"`), since in memory a move stays in the process.

use super::admin_problem::{problem, refused, Problem};
use super::admin_state::Admin;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Json;
use ratelimit_redis::StoreSettings;
use serde_json::json;

/// `GET /plans`.
pub(super) fn list() -> MethodRouter<Admin> {
    axum::routing::get(plans)
}

/// `PUT` and `DELETE /plans/{plan}/keys/{key}`.
pub(super) fn keys() -> MethodRouter<Admin> {
    axum::routing::put(move_in).delete(move_out)
}

/// Each plan with its members counted: no key is shown.
async fn plans(State(admin): State<Admin>) -> Result<Response, Problem> {
    let plans = admin.handle()?.plans().members();
    Ok(Json(json!({ "plans": plans })).into_response())
}

/// 404 unless `plan` is a plan of the table.
fn known(admin: &Admin, plan: &str) -> Result<(), Problem> {
    if admin
        .handle()?
        .plans()
        .plans()
        .iter()
        .any(|p| p.name == plan)
    {
        Ok(())
    } else {
        Err(problem(
            StatusCode::NOT_FOUND,
            &format!("No plan named {plan:?}."),
        ))
    }
}

/// Whether a move reaches every instance: the limits are in Redis, which
/// shares the run-time entries.
fn shared(admin: &Admin) -> bool {
    matches!(admin.limits.deployment.store, StoreSettings::Redis { .. })
}

/// How a key is logged: by its length only (it may be a credential).
fn shown(key: &str) -> String {
    format!("({} characters, not logged)", key.len())
}

async fn move_in(
    State(admin): State<Admin>,
    Path((plan, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    known(&admin, &plan)?;
    Ok(
        match admin.handle()?.plans().move_to_plan(&plan, &key).await {
            Ok(()) => {
                tracing::info!(target: "tower_ratelimit::admin", plan = %plan, key = %shown(&key), "admin: key moved into a plan");
                let shared = shared(&admin);
                Json(json!({ "plan": plan, "moved": true, "shared": shared })).into_response()
            }
            Err(e) => refused(&e),
        },
    )
}

async fn move_out(
    State(admin): State<Admin>,
    Path((plan, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    known(&admin, &plan)?;
    match admin.handle()?.plans().remove_from_plan(&plan, &key).await {
        Ok(Some(now)) => {
            tracing::info!(target: "tower_ratelimit::admin", plan = %plan, key = %shown(&key), now = %now, "admin: key taken out of a plan");
            let body =
                json!({ "plan": plan, "removed": true, "now": now, "shared": shared(&admin) });
            Ok(Json(body).into_response())
        }
        Ok(None) => Err(problem(
            StatusCode::NOT_FOUND,
            &format!("The key is not in plan {plan:?}."),
        )),
        Err(e) => Ok(refused(&e)),
    }
}
