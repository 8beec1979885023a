//! The admin API, off by default: `ADMIN_ADDR` binds it on a listener of
//! its own, `ADMIN_TOKEN` (required with it) is checked as
//! `Authorization: Bearer`. JSON endpoints to list the limits, read and
//! reset a key, and ban or unban it, on the stores the public routes use.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /limits` | each limit's name, algorithm, key, routes, ban, and the reloads applied |
//! | `GET /limits/{name}/keys/{key}` | the key's `remaining`, `quota`, `reset_seconds` (a peek) and `banned_seconds` (what is left of its ban, or null) |
//! | `DELETE /limits/{name}/keys/{key}` | resets the key (its whole quota back) |
//! | `PUT /limits/{name}/bans/{key}` | bans the key; body `{"for": "1h"}` |
//! | `DELETE /limits/{name}/bans/{key}` | lifts the key's ban and resets it (so the client starts afresh: a ban lifted while its use is over the limit would begin again at its next request) |
//! | `PUT /allow/{entry}`, `PUT /deny/{entry}` | adds a CIDR, an address or a key to every limit's allow or deny list; body `{"ttl": "1h"}` |
//! | `DELETE /allow/{entry}`, `DELETE /deny/{entry}` | removes it |
//!
//! `{key}` is the key as the limit renders it, percent-encoded (an IP, a
//! network as `2001:db8:1:2::/64`, a raw API key, which the store
//! hashes). An address is keyed as the limit keys it (on a per-/64
//! limit, its /64); a network of another length than the limit keys
//! (`198.51.100.0/24` on a per-address limit) is refused with 400 naming
//! the limit: it is not one client's key.
//!
//! Every request needs the token, unknown paths too. A wrong or missing
//! token gets 401; 10 of those a minute per source address, and 30 a
//! minute from all sources, at most: then 429 with `Retry-After`, the
//! token not compared (see [`admin_auth`](crate::admin_auth): a source
//! that has not failed is always let in with the right token). The
//! listener closes a connection whose request head takes over 10 s, or
//! idle that long, and serves at most 64 at once. Bad input gets 400 or 404 with
//! a problem body, never 500. Every action is logged at `info`, naming
//! the limit and, for an address key, the key (never a secret key).
//!
//! With `REDIS_URL`, every change shows at once on every copy sharing the
//! Redis: resets, bans and unbans through the stores' pub/sub
//! invalidation, list entries and overrides through the copy of them kept
//! in Redis (`ratelimit_redis::RedisEntries`, `PolicyHandle::share`); a
//! Redis failure there is 503.

use crate::admin_auth::{Refused, TokenGate};
use crate::server::{EnvError, ServeOptions};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ratelimit_core::plumbing::parse_duration;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::policy::{LimitHandle, ListKind, PolicyHandle, PolicyKey};

/// The shortest token accepted.
const MIN_TOKEN: usize = 16;

/// Connections the admin listener serves at once.
const MAX_CONNECTIONS: usize = 64;

/// Where the admin API listens and the token it takes.
#[derive(Clone)]
pub struct AdminSettings {
    /// `ADMIN_ADDR`.
    pub addr: SocketAddr,
    token: Arc<str>,
}

impl std::fmt::Debug for AdminSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminSettings")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl AdminSettings {
    /// Settings for `addr` and `token` (at least 16 characters).
    pub fn new(addr: SocketAddr, token: &str) -> Result<Self, EnvError> {
        let token = token.trim();
        if token.len() < MIN_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(EnvError::new(
                "ADMIN_TOKEN",
                None,
                format!("expected at least {MIN_TOKEN} visible ASCII characters"),
            ));
        }
        Ok(Self {
            addr,
            token: token.into(),
        })
    }

    /// `ADMIN_ADDR` and `ADMIN_TOKEN` from `var`: `None` when
    /// `ADMIN_ADDR` is unset or empty (the default: no admin API); an
    /// error naming the variable for a bad address, or a missing or short
    /// token.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EnvError> {
        let Some(addr) = var("ADMIN_ADDR").filter(|a| !a.trim().is_empty()) else {
            return Ok(None);
        };
        let parsed: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|e| EnvError::new("ADMIN_ADDR", Some(addr.clone()), e))?;
        let token = var("ADMIN_TOKEN").unwrap_or_default();
        if token.trim().is_empty() {
            return Err(EnvError::new(
                "ADMIN_TOKEN",
                None,
                "required when ADMIN_ADDR is set",
            ));
        }
        Self::new(parsed, &token).map(Some)
    }

    /// [`from_vars`](Self::from_vars) on the process environment.
    pub fn from_env() -> Result<Option<Self>, EnvError> {
        Self::from_vars(|v| std::env::var(v).ok())
    }
}

#[derive(Clone)]
struct Admin {
    limits: Arc<PolicyHandle>,
}

/// A refused admin request: a problem+json response.
struct Problem {
    status: StatusCode,
    detail: String,
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        let mut res = (
            self.status,
            [("content-type", "application/problem+json")],
            body.to_string(),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                "www-authenticate",
                axum::http::HeaderValue::from_static("Bearer realm=\"admin\""),
            );
        }
        res
    }
}

/// Every refusal with a problem body: axum's own too (a path that is not
/// UTF-8, a method the endpoint does not take), their text as the detail,
/// cut to 200 characters; their other headers (`Allow`) kept.
async fn as_problem(res: Response) -> Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if is_problem || !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let mut detail: String = text.trim().chars().take(200).collect();
    if detail.is_empty() {
        detail = status.canonical_reason().unwrap_or("Refused").to_owned();
    }
    if !detail.ends_with('.') {
        detail.push('.');
    }
    let mut out = problem(status, &detail).into_response();
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

fn problem(status: StatusCode, detail: &str) -> Problem {
    Problem {
        status,
        detail: detail.to_owned(),
    }
}

/// Lets a request with the admin token through (see
/// [`admin_auth`](crate::admin_auth)); else 401, or 429 with `Retry-After`
/// once its source, or every source, sent too many wrong tokens.
async fn authorized(State(gate): State<TokenGate>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .trim();
    match gate.admit(peer, given) {
        Ok(()) => next.run(req).await,
        Err(Refused::WrongToken) => {
            tracing::info!(target: "axum_example::admin", %peer, "admin request refused: wrong or missing token");
            problem(StatusCode::UNAUTHORIZED, "A valid admin token is required.").into_response()
        }
        Err(Refused::TooMany(wait)) => {
            tracing::debug!(target: "axum_example::admin", %peer, "admin request refused: too many wrong tokens");
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let mut res = problem(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many wrong admin tokens; try again later.",
            )
            .into_response();
            res.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs.max(1)),
            );
            res
        }
    }
}

impl Admin {
    fn limit(&self, name: &str) -> Result<&LimitHandle, Problem> {
        self.limits
            .get(name)
            .ok_or_else(|| problem(StatusCode::NOT_FOUND, &format!("No limit named {name:?}.")))
    }
}

/// The limit and key of an authorized request's path, or the problem.
fn key_of<'a>(
    admin: &'a Admin,
    name: &str,
    key: &str,
) -> Result<(&'a LimitHandle, PolicyKey), Problem> {
    let limit = admin.limit(name)?;
    let key = limit
        .key(key)
        .map_err(|e| problem(StatusCode::BAD_REQUEST, &format!("Bad key: {e}.")))?;
    Ok((limit, key))
}

/// How a key is logged: an address or a network as itself, anything
/// else (an API key, a token) only by its length.
fn loggable(key: &PolicyKey) -> String {
    match key {
        PolicyKey::Ip(ip) => ip.to_string(),
        other => format!("({} characters, not logged)", other.to_string().len()),
    }
}

fn store_failed(e: &ratelimit_core::StoreError) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("The limit's store failed: {}.", e.kind()),
    )
    .into_response()
}

async fn list(State(admin): State<Admin>) -> Response {
    let limits: Vec<_> = admin
        .limits
        .handles()
        .iter()
        .map(|h| {
            let entry = admin.limits.entry(h.name());
            json!({
                "name": h.name(),
                "algorithm": h.algorithm().get().to_string(),
                "key": entry.map(|e| e.key.to_string()),
                "routes": entry.map(|e| e.routes.iter().map(ToString::to_string).collect::<Vec<_>>()),
                "ban": entry.and_then(|e| e.ban).map(ratelimit_core::plumbing::format_duration),
            })
        })
        .collect();
    Json(json!({ "limits": limits, "reloads": admin.limits.reloads() })).into_response()
}

async fn read_key(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Response {
    let (limit, key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let peek = match limit.peek(&key).await {
        Ok(d) => d,
        Err(e) => return store_failed(&e),
    };
    let banned = match limit.ban_left(&key).await {
        Ok(left) => left.map(|d| d.as_secs_f64()),
        Err(e) => return store_failed(&e),
    };
    Json(json!({
        "limit": limit.name(),
        "key": key.to_string(),
        "remaining": peek.remaining,
        "quota": peek.limit,
        "reset_seconds": peek.reset.as_secs_f64(),
        "banned_seconds": banned,
    }))
    .into_response()
}

async fn reset_key(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Response {
    let (limit, key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    match limit.reset(&key).await {
        Ok(()) => {
            tracing::info!(target: "axum_example::admin", limit = limit.name(), key = %loggable(&key), "admin: key reset");
            Json(json!({ "limit": limit.name(), "reset": true })).into_response()
        }
        Err(e) => store_failed(&e),
    }
}

/// The duration `field` of a body (`{"for": "1h"}`), or the problem.
fn body_duration(body: &Bytes, field: &str) -> Result<Duration, Problem> {
    let bad = |why: &str| problem(StatusCode::BAD_REQUEST, why);
    let expected = || {
        bad(&format!(
            "Expected a JSON body such as {{\"{field}\": \"1h\"}}."
        ))
    };
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| expected())?;
    let text = v.get(field).and_then(|f| f.as_str()).ok_or_else(expected)?;
    let d = parse_duration(text).map_err(|e| bad(&format!("Bad duration: {e}.")))?;
    if d < Duration::from_millis(1) || d > Duration::from_secs(366 * 86_400) {
        return Err(bad("A duration of 1ms to 366d is expected."));
    }
    Ok(d)
}

async fn ban(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (limit, key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let d = match body_duration(&body, "for") {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    match limit.ban(&key, d).await {
        Ok(()) => {
            let text = ratelimit_core::plumbing::format_duration(d);
            tracing::info!(target: "axum_example::admin", limit = limit.name(), key = %loggable(&key), ban = %text, "admin: key banned");
            Json(json!({ "limit": limit.name(), "banned_for": text })).into_response()
        }
        Err(e) => store_failed(&e),
    }
}

/// The algorithm of a body (`{"algorithm": "gcra 100/1m"}`), or the
/// problem.
fn body_algorithm(body: &Bytes) -> Result<ratelimit_core::AnyAlgorithm, Problem> {
    let bad = |why: &str| problem(StatusCode::BAD_REQUEST, why);
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| bad("Expected a JSON body such as {\"algorithm\": \"gcra 100/1m\"}."))?;
    let text = v
        .get("algorithm")
        .and_then(|a| a.as_str())
        .ok_or_else(|| bad("Expected a JSON body such as {\"algorithm\": \"gcra 100/1m\"}."))?;
    text.parse()
        .map_err(|e| bad(&format!("Bad algorithm: {e}.")))
}

async fn set_override(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (limit, policy_key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let algorithm = match body_algorithm(&body) {
        Ok(a) => a,
        Err(r) => return r.into_response(),
    };
    match admin
        .limits
        .set_override(limit.name(), &key, algorithm)
        .await
    {
        Ok(()) => {
            tracing::info!(target: "axum_example::admin", limit = limit.name(), key = %loggable(&policy_key), %algorithm, "admin: override set");
            Json(json!({ "limit": limit.name(), "algorithm": algorithm.to_string() }))
                .into_response()
        }
        Err(e) => refused(&e),
    }
}

async fn remove_override(
    State(admin): State<Admin>,
    Path((name, key)): Path<(String, String)>,
) -> Response {
    let (limit, policy_key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    match admin.limits.remove_override(limit.name(), &key).await {
        Ok(had) => {
            tracing::info!(target: "axum_example::admin", limit = limit.name(), key = %loggable(&policy_key), had, "admin: override removed");
            Json(json!({ "limit": limit.name(), "removed": had })).into_response()
        }
        Err(e) => refused(&e),
    }
}

/// A refused change of the run-time entries: 503 when the shared copy in
/// Redis failed, else 400 (bad input, the cap).
fn refused(why: &str) -> Response {
    let status = if why.starts_with("redis failed") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_REQUEST
    };
    problem(status, &format!("{why}.")).into_response()
}

async fn unban(State(admin): State<Admin>, Path((name, key)): Path<(String, String)>) -> Response {
    let (limit, key) = match key_of(&admin, &name, &key) {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    // The use first: lifted with its use still over the limit, the ban
    // would begin again at the key's next request. Meanwhile the ban
    // still stands (its denials change nothing).
    if let Err(e) = limit.reset(&key).await {
        return store_failed(&e);
    }
    match limit.unban(&key).await {
        Ok(()) => {
            tracing::info!(target: "axum_example::admin", limit = limit.name(), key = %loggable(&key), "admin: key unbanned and reset");
            Json(json!({ "limit": limit.name(), "banned": false, "reset": true })).into_response()
        }
        Err(e) => store_failed(&e),
    }
}

/// The name of a list, in paths and logs.
fn list_name(kind: ListKind) -> &'static str {
    match kind {
        ListKind::Allow => "allow",
        ListKind::Deny => "deny",
    }
}

async fn add_entry(kind: ListKind, admin: Admin, entry: String, body: Bytes) -> Response {
    let list = list_name(kind);
    let ttl = match body_duration(&body, "ttl") {
        Ok(d) => d,
        Err(r) => return r.into_response(),
    };
    match admin.limits.add_to_list(kind, &entry, ttl).await {
        Ok(()) => {
            let ttl = ratelimit_core::plumbing::format_duration(ttl);
            let shown = if entry.parse::<ipnet::IpNet>().is_ok()
                || entry.parse::<std::net::IpAddr>().is_ok()
            {
                entry.clone()
            } else {
                format!("({} characters, not logged)", entry.len())
            };
            tracing::info!(target: "axum_example::admin", list = %list, entry = %shown, ttl = %ttl, "admin: list entry added");
            Json(json!({ "list": list, "added": true, "ttl": ttl })).into_response()
        }
        Err(e) if e.starts_with("redis failed") => refused(&e),
        Err(e) => problem(StatusCode::BAD_REQUEST, &format!("Bad entry: {e}.")).into_response(),
    }
}

async fn remove_entry(kind: ListKind, admin: Admin, entry: String) -> Response {
    let list = list_name(kind);
    match admin.limits.remove_from_list(kind, &entry).await {
        Ok(true) => {}
        Ok(false) => {
            return problem(StatusCode::NOT_FOUND, "No such entry added at run time.")
                .into_response()
        }
        Err(e) => return refused(&e),
    }
    tracing::info!(target: "axum_example::admin", list = %list, "admin: list entry removed");
    Json(json!({ "list": list, "removed": true })).into_response()
}

/// `PUT` and `DELETE` of an entry of the `kind` list.
fn list_routes(kind: ListKind) -> axum::routing::MethodRouter<Admin> {
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

/// The admin API on `limits` (the handle the app's policy returned),
/// taking `settings`' token: wrong tokens limited per source address and
/// across all sources (see [`admin_auth`](crate::admin_auth)).
pub fn admin_router(limits: Arc<PolicyHandle>, settings: &AdminSettings) -> Router {
    let admin = Admin { limits };
    let gate = TokenGate::new(Arc::clone(&settings.token));
    Router::new()
        .route("/limits", get(list))
        .route("/limits/{name}/keys/{key}", get(read_key).delete(reset_key))
        .route(
            "/limits/{name}/bans/{key}",
            axum::routing::put(ban).delete(unban),
        )
        .route(
            "/limits/{name}/overrides/{key}",
            axum::routing::put(set_override).delete(remove_override),
        )
        .route("/allow/{entry}", list_routes(ListKind::Allow))
        .route("/deny/{entry}", list_routes(ListKind::Deny))
        .fallback(|| async { problem(StatusCode::NOT_FOUND, "No such admin endpoint.") })
        .with_state(admin)
        .layer(axum::middleware::map_response(as_problem))
        .layer(axum::middleware::from_fn_with_state(gate, authorized))
}

/// Serves the admin API on `settings.addr` until the process ends;
/// returns the bound address. Binding fails with an error naming
/// `ADMIN_ADDR`.
pub async fn serve_admin(
    limits: Arc<PolicyHandle>,
    settings: &AdminSettings,
) -> Result<SocketAddr, EnvError> {
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .map_err(|e| EnvError::new("ADMIN_ADDR", Some(settings.addr.to_string()), e))?;
    let addr = listener.local_addr().unwrap_or(settings.addr);
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "admin API on a non-loopback address: keep it behind a firewall");
    }
    let app = admin_router(limits, settings);
    // The public listener's hardening (a request head or an idle
    // connection closed after 10 s, a request answered 408 after 10 s,
    // bodies of 64 KiB at most), for fewer connections.
    let options = ServeOptions {
        max_connections: MAX_CONNECTIONS,
        ..ServeOptions::default()
    };
    tokio::spawn(crate::run(listener, app, options, std::future::pending()));
    tracing::info!(%addr, "admin API (ADMIN_ADDR), bearer token from ADMIN_TOKEN");
    Ok(addr)
}
