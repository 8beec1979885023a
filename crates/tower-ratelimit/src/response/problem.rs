//! The default rejection: RFC 9457 `application/problem+json` bodies.

use super::{Rejection, ResponseBuilder};
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Response, StatusCode};
use std::fmt::Write;

/// `application/problem+json`.
pub const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The default [`ResponseBuilder`]: RFC 9457 problem details, for any body
/// type that can be made from [`Bytes`] (axum's `Body`, `Full<Bytes>`,
/// `Bytes`...).
///
/// - Limited: `429 Too Many Requests`, body
///   `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"...","limit":"name","retry_after":12}`
///   (`retry_after` in whole seconds, rounded up, as in the `Retry-After`
///   header). A request whose cost exceeds the limit's capacity can never be
///   admitted: it also gets 429, but without `Retry-After` or
///   `retry_after`, and a detail saying so (retrying cannot help).
/// - Key error: its 4xx status (400, 401 with `WWW-Authenticate`), with a
///   detail naming what was missing or malformed.
/// - Store unavailable (fail closed): `503 Service Unavailable`, detail
///   "The rate limiter is unavailable".
#[derive(Debug, Clone, Copy, Default)]
pub struct ProblemJson {
    _priv: (),
}

impl ProblemJson {
    /// The default builder.
    pub const fn new() -> Self {
        Self { _priv: () }
    }
}

/// Rounds up to whole seconds: a positive wait is never 0.
#[inline]
pub(crate) fn ceil_secs(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn problem(status: StatusCode, detail: &str, extra: impl FnOnce(&mut String)) -> String {
    let mut out = String::with_capacity(160);
    out.push_str("{\"type\":\"about:blank\",\"title\":");
    json_str(&mut out, status.canonical_reason().unwrap_or("Error"));
    let _ = write!(out, ",\"status\":{},\"detail\":", status.as_u16());
    json_str(&mut out, detail);
    extra(&mut out);
    out.push('}');
    out
}

impl ProblemJson {
    /// The problem+json body for `rejection`, and its status.
    pub fn body(&self, rejection: Rejection<'_>) -> (StatusCode, String) {
        match rejection {
            Rejection::Limited(info) => {
                let status = StatusCode::TOO_MANY_REQUESTS;
                let Some(denied) = info.denied() else {
                    return (status, problem(status, "Rate limit exceeded.", |_| {}));
                };
                let name = &*denied.name;
                match denied.decision.retry_after() {
                    Some(wait) => {
                        let secs = ceil_secs(wait);
                        let detail = format!(
                            "Rate limit \"{name}\" exceeded: retry in {secs} second{}.",
                            if secs == 1 { "" } else { "s" }
                        );
                        let body = problem(status, &detail, |out| {
                            out.push_str(",\"limit\":");
                            json_str(out, name);
                            let _ = write!(out, ",\"retry_after\":{secs}");
                        });
                        (status, body)
                    }
                    None => {
                        let detail = format!(
                            "This request costs more than rate limit \"{name}\" allows ({} per window): it can never be admitted.",
                            denied.decision.limit
                        );
                        let body = problem(status, &detail, |out| {
                            out.push_str(",\"limit\":");
                            json_str(out, name);
                        });
                        (status, body)
                    }
                }
            }
            Rejection::KeyError(e) => {
                let text = e.to_string();
                let mut chars = text.chars();
                let detail = match chars.next() {
                    Some(first) => format!("{}{}.", first.to_ascii_uppercase(), chars.as_str()),
                    None => text,
                };
                (e.status(), problem(e.status(), &detail, |_| {}))
            }
            Rejection::Unavailable(_) => {
                let status = StatusCode::SERVICE_UNAVAILABLE;
                let detail = "The rate limiter is unavailable; try again later.";
                (status, problem(status, detail, |_| {}))
            }
        }
    }
}

impl<B: From<Bytes>> ResponseBuilder<B> for ProblemJson {
    fn build(&self, rejection: Rejection<'_>) -> Response<B> {
        let (status, body) = self.body(rejection);
        let mut res = Response::new(B::from(Bytes::from(body)));
        *res.status_mut() = status;
        res.headers_mut().insert(CONTENT_TYPE, PROBLEM_JSON);
        if let Rejection::KeyError(e) = rejection {
            if let Some(c) = e.challenge() {
                res.headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static(c));
            }
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rounding_up() {
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(999)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }

    #[test]
    fn escapes() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\n");
        assert_eq!(s, r#""a\"b\\c\u000a""#);
    }
}
