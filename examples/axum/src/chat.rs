//! `POST /v1/chat`: a small AI gateway's chat call, whose tokens are known only after the handler runs (reported in `x-tokens-used`, or per streamed event).

use crate::api_keys::{ApiKeys, API_KEY_CHALLENGE};
use crate::handlers::{problem, unauthorized};
use axum::body::{Body, Bytes};
use axum::extract::Extension;
use axum::http::{request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::time::Duration;
use tower_ratelimit::CostReport;

/// The most tokens one call uses: the model's largest `max_tokens`.
pub const MAX_TOKENS_PER_CALL: u64 = 40_000;

/// Tokens per streamed event.
pub const TOKENS_PER_EVENT: u64 = 100;

/// The time between two streamed events.
pub const EVENT_GAP: Duration = Duration::from_millis(100);

#[derive(serde::Deserialize)]
struct Chat {
    tokens: u64,
    #[serde(default)]
    stream: bool,
}

/// "Uses" the body's `tokens`, at most what the call reserved
/// ([`CostReport::reserved`], what a real gateway passes upstream as the
/// model's `max_tokens`) and at most [`MAX_TOKENS_PER_CALL`]: answers
/// with them in `x-tokens-used`, or, with `"stream": true`, as server-sent
/// events of [`TOKENS_PER_EVENT`] each, [`EVENT_GAP`] apart, each counted
/// on the request's [`CostReport`] as it is sent. A known `X-API-Key` is
/// required (401 otherwise).
pub(crate) async fn chat(
    keys: ApiKeys,
    report: Option<Extension<CostReport>>,
    req: Parts,
    body: Bytes,
) -> Response {
    if keys.known(&req).is_err() {
        return unauthorized("a known X-API-Key is required", API_KEY_CHALLENGE);
    }
    let Ok(call) = serde_json::from_slice::<Chat>(&body) else {
        let detail = "expected a JSON object {\"tokens\": N, \"stream\": false}";
        return problem(StatusCode::BAD_REQUEST, detail);
    };
    let report = report.map(|Extension(r)| r);
    let budget = report.as_ref().map_or(u64::MAX, CostReport::reserved);
    let tokens = call.tokens.min(budget).min(MAX_TOKENS_PER_CALL);
    if !call.stream {
        let used = [("x-tokens-used", tokens.to_string())];
        return (used, Json(json!({ "tokens": tokens }))).into_response();
    }
    let events = futures_util::stream::unfold((tokens, report), |(left, report)| async move {
        if left == 0 {
            return None;
        }
        tokio::time::sleep(EVENT_GAP).await;
        let n = left.min(TOKENS_PER_EVENT);
        if let Some(r) = &report {
            r.add(n);
        }
        let event = Bytes::from(format!("data: {{\"tokens\": {n}}}\n\n"));
        Some((Ok::<_, std::convert::Infallible>(event), (left - n, report)))
    });
    let event_stream = [("content-type", "text/event-stream")];
    (event_stream, Body::from_stream(events)).into_response()
}
