//! The admin API's run-time entries: per-key overrides, and the allow and
//! deny lists, shared through Redis when the limits are there.

use super::admin_problem::{problem, refused, Problem};
use super::admin_state::{body_duration, loggable, Admin};
use crate::policy::ListKind;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Json;
use ratelimit_core::plumbing::format_duration;
use ratelimit_core::AnyAlgorithm;
use serde_json::json;

/// `PUT` and `DELETE` of a limit's override for a key.
pub(super) fn overrides() -> MethodRouter<Admin> {
    axum::routing::put(set_override).delete(remove_override)
}

/// `PUT` and `DELETE` of an entry of the `kind` list.
pub(super) fn list(kind: ListKind) -> MethodRouter<Admin> {
    axum::routing::put(
        move |State(admin): State<Admin>, Path(entry): Path<String>, body: Bytes| {
            add_entry(kind, admin, entry, body)
        },
    )
    .delete(
        move |State(admin): State<Admin>, Path(entry): Path<String>| {
            remove_entry(kind, admin, entry)
        },
    )
}

/// The algorithm of a body (`{"algorithm": "gcra 100/1m"}`), or the
/// problem.
fn body_algorithm(body: &Bytes) -> Result<AnyAlgorithm, Problem> {
    let bad = |why: &str| problem(StatusCode::BAD_REQUEST, why);
    let expected = || bad("Expected a JSON body such as {\"algorithm\": \"gcra 100/1m\"}.");
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| expected())?;
    let text = v
        .get("algorithm")
        .and_then(|a| a.as_str())
        .ok_or_else(expected)?;
    text.parse()
        .map_err(|e| bad(&format!("Bad algorithm: {e}.")))
}

async fn set_override(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Problem> {
    let (limit, policy_key) = admin.key_of(&name, &key)?;
    let algorithm = body_algorithm(&body)?;
    Ok(
        match admin
            .handle()?
            .set_override(limit.name(), &key, algorithm)
            .await
        {
            Ok(()) => {
                tracing::info!(target: "tower_ratelimit::admin", limit = limit.name(), key = %loggable(&policy_key), %algorithm, "admin: override set");
                Json(json!({ "limit": limit.name(), "algorithm": algorithm.to_string() }))
                    .into_response()
            }
            Err(e) => refused(&e),
        },
    )
}

async fn remove_override(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let (limit, policy_key) = admin.key_of(&name, &key)?;
    Ok(
        match admin.handle()?.remove_override(limit.name(), &key).await {
            Ok(had) => {
                tracing::info!(target: "tower_ratelimit::admin", limit = limit.name(), key = %loggable(&policy_key), had, "admin: override removed");
                Json(json!({ "limit": limit.name(), "removed": had })).into_response()
            }
            Err(e) => refused(&e),
        },
    )
}

/// The name of a list, in paths and logs.
fn list_name(kind: ListKind) -> &'static str {
    match kind {
        ListKind::Allow => "allow",
        ListKind::Deny => "deny",
    }
}

async fn add_entry(
    kind: ListKind,
    admin: Admin,
    entry: String,
    body: Bytes,
) -> Result<Response, Problem> {
    let list = list_name(kind);
    let ttl = body_duration(&body, "ttl")?;
    Ok(match admin.handle()?.add_to_list(kind, &entry, ttl).await {
        Ok(()) => {
            let ttl = format_duration(ttl);
            let is_ip =
                entry.parse::<ipnet::IpNet>().is_ok() || entry.parse::<std::net::IpAddr>().is_ok();
            let shown = if is_ip {
                entry.clone()
            } else {
                format!("({} characters, not logged)", entry.len())
            };
            tracing::info!(target: "tower_ratelimit::admin", list = %list, entry = %shown, ttl = %ttl, "admin: list entry added");
            Json(json!({ "list": list, "added": true, "ttl": ttl })).into_response()
        }
        Err(e) if e.starts_with("redis failed") => refused(&e),
        Err(e) => problem(StatusCode::BAD_REQUEST, &format!("Bad entry: {e}.")).into_response(),
    })
}

async fn remove_entry(kind: ListKind, admin: Admin, entry: String) -> Result<Response, Problem> {
    let list = list_name(kind);
    match admin.handle()?.remove_from_list(kind, &entry).await {
        Ok(true) => {}
        Ok(false) => {
            return Err(problem(
                StatusCode::NOT_FOUND,
                "No such entry added at run time.",
            ))
        }
        Err(e) => return Ok(refused(&e)),
    }
    tracing::info!(target: "tower_ratelimit::admin", list = %list, "admin: list entry removed");
    Ok(Json(json!({ "list": list, "removed": true })).into_response())
}
