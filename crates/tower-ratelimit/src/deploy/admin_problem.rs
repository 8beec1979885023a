//! The admin API's refusals (`Problem`): `application/problem+json`
//! bodies, axum's own refusals rewritten as such, never a 500 for bad input.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A refused admin request: a problem+json response.
pub(super) struct Problem {
    status: StatusCode,
    detail: String,
}

/// A refusal with `status` and `detail`.
pub(super) fn problem(status: StatusCode, detail: &str) -> Problem {
    Problem {
        status,
        detail: detail.to_owned(),
    }
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
            let realm = HeaderValue::from_static("Bearer realm=\"admin\"");
            res.headers_mut().insert(header::WWW_AUTHENTICATE, realm);
        }
        res
    }
}

/// Every refusal with a problem body: axum's own too (a path that is not
/// UTF-8, a method the endpoint does not take), their text as the detail,
/// cut to 200 characters; their other headers (`Allow`) kept.
pub(super) async fn as_problem(res: Response) -> Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
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
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// A store that failed: 503.
pub(super) fn store_failed(e: &ratelimit_core::StoreError) -> Response {
    let detail = format!("The limit's store failed: {}.", e.kind());
    problem(StatusCode::SERVICE_UNAVAILABLE, &detail).into_response()
}

/// A refused change of the run-time entries: 503 when the shared copy in
/// Redis failed, else 400 (bad input, the cap).
pub(super) fn refused(why: &str) -> Response {
    let status = if why.starts_with("redis failed") {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_REQUEST
    };
    problem(status, &format!("{why}.")).into_response()
}
