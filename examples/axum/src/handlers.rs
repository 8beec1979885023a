//! The handlers of the plain routes (tickets, accounts, login, items,
//! reports, the download) and the problem answers they share.

use crate::api_keys::{ApiKeys, API_KEY_CHALLENGE};
use axum::body::{Body, Bytes};
use axum::extract::Extension;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::sync::OnceLock;
use std::time::Duration;
use tower_ratelimit::RateLimitInfo;

/// The `WWW-Authenticate` challenge sent with a failed login's 401. The
/// credentials go in the body, so the scheme is the app's own: one no
/// browser answers with a password dialog.
pub const LOGIN_CHALLENGE: &str = "Login realm=\"axum-example\"";

// The limits' details are there when the file covers the route; a file
// that does not leaves the route unlimited, not broken.
pub(crate) async fn create_ticket(info: Option<Extension<RateLimitInfo>>) -> impl IntoResponse {
    let next = info.and_then(|Extension(i)| Some(i.decisions().first()?.decision.reset.as_secs()));
    let body = json!({ "ticket": "created", "next_ticket_in_seconds": next });
    (StatusCode::CREATED, Json(body))
}

pub(crate) async fn create_account(info: Option<Extension<RateLimitInfo>>) -> impl IntoResponse {
    let remaining = info.map(|Extension(info)| info.remaining());
    let body = json!({ "account": "created", "remaining_today": remaining });
    (StatusCode::CREATED, Json(body))
}

#[derive(serde::Deserialize)]
struct Login {
    username: String,
    password: String,
}

/// Accepts any content type whose body is the JSON object.
pub(crate) async fn login(body: Bytes) -> Response {
    let Ok(login) = serde_json::from_slice::<Login>(&body) else {
        let detail = "expected a JSON object {\"username\": ..., \"password\": ...}";
        return problem(StatusCode::BAD_REQUEST, detail);
    };
    if login.password == "open sesame" {
        Json(json!({ "user": login.username, "logged_in": true })).into_response()
    } else {
        unauthorized("wrong username or password", LOGIN_CHALLENGE)
    }
}

pub(crate) async fn list_items(keys: ApiKeys, req: Parts) -> Response {
    if keys.is_unknown(&req) {
        return unauthorized("unknown API key", API_KEY_CHALLENGE);
    }
    Json(json!({ "items": ["apple", "banana", "cherry"] })).into_response()
}

/// An expensive report: about 100 ms each.
pub(crate) async fn report() -> Json<serde_json::Value> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    Json(json!({ "report": "ready" }))
}

/// The size of `GET /download`: 1 MiB.
pub const DOWNLOAD_BYTES: usize = 1 << 20;

/// Answers with [`DOWNLOAD_BYTES`] bytes, made once for the process
/// (a client paced for seconds holds no copy of its own); the pace layer
/// in front of it yields them no faster than the client's budget allows.
pub(crate) async fn download() -> Response {
    static FILE: OnceLock<Bytes> = OnceLock::new();
    let file = FILE.get_or_init(|| Bytes::from(vec![b'.'; DOWNLOAD_BYTES]));
    let octets = [("content-type", "application/octet-stream")];
    (octets, Body::from(file.clone())).into_response()
}

/// A 401 with its `WWW-Authenticate` challenge, which RFC 9110 (§15.5.2)
/// requires of every 401.
pub(crate) fn unauthorized(detail: &str, challenge: &'static str) -> Response {
    let challenge = [(WWW_AUTHENTICATE, HeaderValue::from_static(challenge))];
    (challenge, problem(StatusCode::UNAUTHORIZED, detail)).into_response()
}

pub(crate) fn problem(status: StatusCode, detail: &str) -> Response {
    let body = json!({ "type": "about:blank", "title": status.canonical_reason(), "status": status.as_u16(), "detail": detail });
    let content_type = [("content-type", "application/problem+json")];
    (status, content_type, body.to_string()).into_response()
}
