//! The admin API's state and the helpers its handlers share: the limits
//! it changes, how a key is logged, a body's duration.

use super::admin_problem::{problem, Problem};
use super::inner::Inner;
use crate::policy::{LimitHandle, PolicyHandle, PolicyKey};
use axum::body::Bytes;
use axum::http::StatusCode;
use ratelimit_core::plumbing::parse_duration;
use std::sync::Arc;
use std::time::Duration;

/// The admin API's state: the limits it changes.
#[derive(Clone)]
pub(super) struct Admin {
    pub(super) limits: Arc<Inner>,
}

impl Admin {
    /// The applied limits; 503 before [`Limits::apply`].
    pub(super) fn handle(&self) -> Result<&Arc<PolicyHandle>, Problem> {
        let detail = "The limits are not applied yet.";
        (self.limits.handle.get()).ok_or_else(|| problem(StatusCode::SERVICE_UNAVAILABLE, detail))
    }

    /// The limit named `name` and its key written `key`, or the problem
    /// (404, or 400 for a key no request can have).
    pub(super) fn key_of(
        &self,
        name: &str,
        key: &str,
    ) -> Result<(&LimitHandle, PolicyKey), Problem> {
        let limit = self.handle()?.get(name);
        let limit = limit
            .ok_or_else(|| problem(StatusCode::NOT_FOUND, &format!("No limit named {name:?}.")))?;
        let key = limit
            .key(key)
            .map_err(|e| problem(StatusCode::BAD_REQUEST, &format!("Bad key: {e}.")))?;
        Ok((limit, key))
    }
}

/// How a key is logged: an address or a network as itself, anything
/// else (an API key, a token) only by its length.
pub(super) fn loggable(key: &PolicyKey) -> String {
    match key {
        PolicyKey::Ip(ip) => ip.to_string(),
        other => format!("({} characters, not logged)", other.to_string().len()),
    }
}

/// The duration `field` of a body (`{"for": "1h"}`), or the problem.
pub(super) fn body_duration(body: &Bytes, field: &str) -> Result<Duration, Problem> {
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
