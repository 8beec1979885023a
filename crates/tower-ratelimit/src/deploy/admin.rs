//! The admin API (`Limits::admin_router`): list the limits, read, reset,
//! ban and unban a key; behind the bearer token of `admin_auth`.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /limits` | each limit's name, algorithm, key, routes, ban, and the reloads applied |
//! | `GET /limits/{name}/keys/{key}` | the key's `remaining`, `quota`, `reset_seconds` (a peek) and `banned_seconds` |
//! | `DELETE /limits/{name}/keys/{key}` | resets the key |
//! | `PUT /limits/{name}/bans/{key}` | bans the key; body `{"for": "1h"}` |
//! | `DELETE /limits/{name}/bans/{key}` | lifts the ban and resets the key |
//! | `PUT`, `DELETE /limits/{name}/overrides/{key}` | a per-key algorithm; body `{"algorithm": "gcra 100/1m"}` |
//! | `PUT`, `DELETE /allow/{entry}`, `/deny/{entry}` | a run-time list entry; body `{"ttl": "1h"}` |
//! | `GET /plans` | each plan's name, key, `shared`, and its members counted: `listed` by its sources, `moved_in` at run time (no key is shown) |
//! | `PUT /plans/{plan}/keys/{key}` | moves the key into the plan, out of any other |
//! | `DELETE /plans/{plan}/keys/{key}` | takes the key out of the plan: back to the plan its sources give it, or none; `now` names it |

use super::admin_auth::{AdminGate, AdminRefusal};
use super::admin_problem::{as_problem, problem, store_failed, Problem};
use super::admin_state::{body_duration, loggable, Admin};
use super::admin_token::AdminToken;
use super::limits::Limits;
use crate::policy::ListKind;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use ratelimit_core::plumbing::format_duration;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

impl Limits {
    /// The admin API (see the [module docs](super)), when `[admin]` or
    /// `ADMIN_ADDR` turns it on; serve it on
    /// [`admin_addr`](Self::admin_addr) with `ConnectInfo` (its failure
    /// limit is per address). Every request needs the token; a wrong one
    /// gets 401, too many 429.
    pub fn admin_router(&self) -> Option<Router> {
        let admin = self.inner.deployment.admin.as_ref()?;
        let gate = (AdminGate::new(), admin.token.clone());
        let admin = Admin {
            limits: Arc::clone(&self.inner),
        };
        let router = Router::new()
            .route("/limits", get(list))
            .route("/limits/{name}/keys/{key}", get(read_key).delete(reset_key))
            .route("/limits/{name}/bans/{key}", put(ban).delete(unban))
            .route(
                "/limits/{name}/overrides/{key}",
                super::admin_entries::overrides(),
            )
            .route(
                "/allow/{entry}",
                super::admin_entries::list(ListKind::Allow),
            )
            .route("/deny/{entry}", super::admin_entries::list(ListKind::Deny))
            .route("/plans", super::admin_plans::list())
            .route("/plans/{plan}/keys/{key}", super::admin_plans::keys())
            .fallback(|| async { problem(StatusCode::NOT_FOUND, "No such admin endpoint.") })
            .with_state(admin)
            .layer(axum::middleware::map_response(as_problem))
            .layer(axum::middleware::from_fn_with_state(gate, authorized));
        Some(router)
    }
}

/// Lets a request with the admin token through; else 401, or 429 with
/// `Retry-After` once its source, or every source, sent too many wrong
/// tokens.
async fn authorized(
    State((gate, token)): State<(AdminGate, AdminToken)>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .trim();
    match gate.admit(&token, peer, given) {
        Ok(()) => next.run(req).await,
        Err(AdminRefusal::WrongToken) => {
            tracing::info!(target: "tower_ratelimit::admin", %peer, "admin request refused: wrong or missing token");
            problem(StatusCode::UNAUTHORIZED, "A valid admin token is required.").into_response()
        }
        Err(AdminRefusal::TooMany(wait)) => {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let detail = "Too many wrong admin tokens; try again later.";
            let mut res = problem(StatusCode::TOO_MANY_REQUESTS, detail).into_response();
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
            res
        }
    }
}

async fn list(State(admin): State<Admin>) -> Result<Response, Problem> {
    let handle = admin.handle()?;
    let limits: Vec<_> = handle
        .handles()
        .iter()
        .map(|h| {
            let entry = handle.entry(h.name());
            json!({
                "name": h.name(),
                "algorithm": h.algorithm().get().to_string(),
                "key": entry.map(|e| e.key.to_string()),
                "routes": entry.map(|e| e.routes.iter().map(ToString::to_string).collect::<Vec<_>>()),
                "ban": entry.and_then(|e| e.ban).map(format_duration),
            })
        })
        .collect();
    Ok(Json(json!({ "limits": limits, "reloads": handle.reloads() })).into_response())
}

async fn read_key(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let (limit, key) = admin.key_of(&name, &key)?;
    let peek = match limit.peek(&key).await {
        Ok(d) => d,
        Err(e) => return Ok(store_failed(&e)),
    };
    let banned = match limit.ban_left(&key).await {
        Ok(left) => left.map(|d| d.as_secs_f64()),
        Err(e) => return Ok(store_failed(&e)),
    };
    Ok(Json(json!({
        "limit": limit.name(),
        "key": key.to_string(),
        "remaining": peek.remaining,
        "quota": peek.limit,
        "reset_seconds": peek.reset.as_secs_f64(),
        "banned_seconds": banned,
    }))
    .into_response())
}

async fn reset_key(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let (limit, key) = admin.key_of(&name, &key)?;
    Ok(match limit.reset(&key).await {
        Ok(()) => {
            tracing::info!(target: "tower_ratelimit::admin", limit = limit.name(), key = %loggable(&key), "admin: key reset");
            Json(json!({ "limit": limit.name(), "reset": true })).into_response()
        }
        Err(e) => store_failed(&e),
    })
}

async fn ban(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Problem> {
    let (limit, key) = admin.key_of(&name, &key)?;
    let d = body_duration(&body, "for")?;
    Ok(match limit.ban(&key, d).await {
        Ok(()) => {
            let text = format_duration(d);
            tracing::info!(target: "tower_ratelimit::admin", limit = limit.name(), key = %loggable(&key), ban = %text, "admin: key banned");
            Json(json!({ "limit": limit.name(), "banned_for": text })).into_response()
        }
        Err(e) => store_failed(&e),
    })
}

async fn unban(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let (limit, key) = admin.key_of(&name, &key)?;
    // The use first: lifted with its use still over the limit, the ban
    // would begin again at the key's next request.
    if let Err(e) = limit.reset(&key).await {
        return Ok(store_failed(&e));
    }
    Ok(match limit.unban(&key).await {
        Ok(()) => {
            tracing::info!(target: "tower_ratelimit::admin", limit = limit.name(), key = %loggable(&key), "admin: key unbanned and reset");
            Json(json!({ "limit": limit.name(), "banned": false, "reset": true })).into_response()
        }
        Err(e) => store_failed(&e),
    })
}
