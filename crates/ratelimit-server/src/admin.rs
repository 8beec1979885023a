//! The admin API (`[admin]`, off by default): list the limits, and peek, reset, ban and unban a key; list the plans and move keys between them; behind a bearer token.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /limits` | each limit's name, domain, algorithm, shadow, ban and descriptors |
//! | `GET /limits/{name}/keys/{key}` | the key's `remaining`, `quota`, `reset_secs` (a peek) and `banned_secs` |
//! | `DELETE /limits/{name}/keys/{key}` | resets the key: its whole quota back |
//! | `PUT /limits/{name}/bans/{key}` | bans the key; body `{"for": "1h"}` |
//! | `DELETE /limits/{name}/bans/{key}` | lifts the key's ban and resets it |
//! | `GET /plans` | each plan's name, key, `shared`, and its members counted: `listed` by its lists, `moved_in` at run time (no key is shown) |
//! | `PUT /plans/{plan}/keys/{key}` | moves the key (a descriptor entry's value) into the plan, out of any other; shared through Redis |
//! | `DELETE /plans/{plan}/keys/{key}` | takes the key out of the plan: back to the plan its lists give it, or none; `now` names it |
//!
//! `{key}` is the limit's state key, percent-encoded: the value of its one
//! entry without a fixed value (an address, a user id). Every request needs
//! `Authorization: Bearer TOKEN`, checked by tower-ratelimit's
//! [`AdminGate`]; errors are JSON `{"error": "..."}`.

use crate::check::MAX_KEY_BYTES;
use crate::http_json::{error, ApiError};
use crate::key_ops::KeyOpError;
use crate::rule::Rule;
use crate::state::State;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, Request, State as Extract};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use ratelimit_core::plumbing::{ceil_secs, format_duration, parse_duration};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::deploy::{AdminGate, AdminRefusal};

/// The longest ban the API takes.
const MAX_BAN: Duration = Duration::from_secs(366 * 86_400);

#[derive(Clone)]
struct Admin {
    state: Arc<State>,
    gate: AdminGate,
}

impl axum::extract::FromRef<Admin> for Arc<State> {
    fn from_ref(admin: &Admin) -> Self {
        Arc::clone(&admin.state)
    }
}

/// The admin API over `state`, taking the admin token in force (read
/// again at each reload). Serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()` so that wrong
/// tokens are counted per source address.
///
/// ```
/// use ratelimit_server::{admin, Config, State};
/// use std::sync::Arc;
///
/// let state = Arc::new(State::new(&Config::parse("", "inline", |_| None).unwrap()).unwrap());
/// let _router = admin::router(state);
/// ```
pub fn router(state: Arc<State>) -> Router {
    let admin = Admin {
        state,
        gate: AdminGate::new(),
    };
    Router::new()
        .route("/limits", get(list))
        .route("/limits/{name}/keys/{key}", get(read_key).delete(reset_key))
        .route("/limits/{name}/bans/{key}", put(ban).delete(unban))
        .route("/plans", crate::admin_plans::list())
        .route("/plans/{plan}/keys/{key}", crate::admin_plans::keys())
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such admin endpoint") })
        .layer(axum::middleware::map_response(as_json))
        .layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            authorized,
        ))
        .with_state(admin)
}

/// Lets a request with the admin token through; else 401, or 429 with
/// `Retry-After` once its source, or every source, sent too many wrong
/// tokens (tower-ratelimit's [`AdminGate`]).
async fn authorized(Extract(admin): Extract<Admin>, req: Request, next: Next) -> Response {
    let connected = req.extensions().get::<ConnectInfo<SocketAddr>>();
    let peer = connected.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let given = bearer(req.headers());
    let admitted = match admin.state.admin_token() {
        Some(token) => admin.gate.admit(&token, peer, given),
        None => Err(AdminRefusal::WrongToken),
    };
    match admitted {
        Ok(()) => next.run(req).await,
        Err(AdminRefusal::WrongToken) => {
            tracing::info!(%peer, "admin request refused: wrong or missing token");
            let mut res =
                error(StatusCode::UNAUTHORIZED, "a valid admin token is required").into_response();
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"ratelimitd\""),
            );
            res
        }
        Err(AdminRefusal::TooMany(wait)) => {
            let mut res = error(
                StatusCode::TOO_MANY_REQUESTS,
                "too many wrong admin tokens; try again later",
            )
            .into_response();
            res.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(ceil_secs(wait).max(1)),
            );
            res
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` field, or "".
fn bearer(headers: &axum::http::HeaderMap) -> &str {
    let field = headers.get(header::AUTHORIZATION);
    let text = field.and_then(|v| v.to_str().ok()).unwrap_or_default();
    text.strip_prefix("Bearer ").unwrap_or_default().trim()
}

/// axum's own refusals (a method the endpoint does not take, a body too
/// large) as JSON errors too, their other headers (`Allow`) kept.
async fn as_json(res: Response) -> Response {
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json || !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let mut message: String = String::from_utf8_lossy(&text)
        .trim()
        .chars()
        .take(200)
        .collect();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("refused").to_owned();
    }
    let mut out = error(status, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

async fn list(Extract(admin): Extract<Admin>) -> Response {
    let limits = admin.state.limits();
    let mut all: Vec<_> = limits.all().collect();
    all.sort_by(|a, b| a.config.name.cmp(&b.config.name));
    let limits: Vec<_> = all
        .iter()
        .map(|r| {
            let c = &r.config;
            json!({
                "name": c.name,
                "domain": c.domain,
                "algorithm": c.algorithm.map(|a| a.to_string()),
                "shadow": c.shadow,
                "ban": c.ban.map(|b| format_duration(b.duration())),
                "plan": c.plan,
                "descriptors": c.entries.iter().map(|e| json!({"key": e.key, "value": e.value})).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({ "limits": limits })).into_response()
}

/// The limit and key of a request's path, or the error.
fn key_of(
    admin: &Admin,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(Arc<Rule>, String), ApiError> {
    let Path((name, key)) = path.map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))?;
    let Some(rule) = admin.state.limits().named(&name).cloned() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no limit named {name:?}"),
        ));
    };
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "a key of {} bytes: expected 1 to {MAX_KEY_BYTES}",
                key.len()
            ),
        ));
    }
    Ok((rule, key))
}

/// How a key is logged: an address as itself, anything else by its length.
fn loggable(key: &str) -> String {
    match key.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => format!("({} bytes, not logged)", key.len()),
    }
}

fn failed(e: KeyOpError) -> ApiError {
    match e {
        KeyOpError::Unlimited => error(StatusCode::BAD_REQUEST, e.to_string()),
        KeyOpError::Store(_) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn read_key(
    Extract(admin): Extract<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (rule, key) = key_of(&admin, path)?;
    let state = rule
        .key_state(&key, admin.state.now())
        .await
        .map_err(failed)?;
    let d = state.peek;
    Ok(Json(json!({
        "limit": rule.config.name,
        "remaining": d.remaining,
        "quota": d.limit,
        "reset_secs": ceil_secs(d.reset),
        "banned_secs": state.banned.map(ceil_secs),
    }))
    .into_response())
}

async fn reset_key(
    Extract(admin): Extract<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (rule, key) = key_of(&admin, path)?;
    rule.reset_key(&key).await.map_err(failed)?;
    tracing::info!(limit = %rule.config.name, key = %loggable(&key), "admin: key reset");
    Ok(Json(json!({ "limit": rule.config.name, "reset": true })).into_response())
}

/// The ban's duration in a body `{"for": "1h"}`, or the error.
fn ban_duration(body: &Bytes) -> Result<Duration, ApiError> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, m);
    let expected = || bad("expected a JSON body such as {\"for\": \"1h\"}".into());
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|_| expected())?;
    let text = value
        .get("for")
        .and_then(|f| f.as_str())
        .ok_or_else(expected)?;
    let d = parse_duration(text).map_err(|e| bad(format!("for = {text:?}: {e}")))?;
    if d < Duration::from_millis(1) || d > MAX_BAN {
        return Err(bad(format!("for = {text:?}: expected 1ms to 366d")));
    }
    Ok(d)
}

async fn ban(
    Extract(admin): Extract<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (rule, key) = key_of(&admin, path)?;
    let d = ban_duration(&body)?;
    rule.ban_key(&key, d, admin.state.now())
        .await
        .map_err(failed)?;
    tracing::info!(limit = %rule.config.name, key = %loggable(&key), secs = ceil_secs(d), "admin: key banned");
    Ok(Json(json!({ "limit": rule.config.name, "banned_secs": ceil_secs(d) })).into_response())
}

async fn unban(
    Extract(admin): Extract<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (rule, key) = key_of(&admin, path)?;
    rule.unban_key(&key).await.map_err(failed)?;
    tracing::info!(limit = %rule.config.name, key = %loggable(&key), "admin: key unbanned and reset");
    Ok(Json(json!({ "limit": rule.config.name, "banned": false, "reset": true })).into_response())
}
