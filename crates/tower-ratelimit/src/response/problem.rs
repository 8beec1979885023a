//! The default rejection: RFC 9457 `application/problem+json` bodies.

use super::{Rejection, ResponseBuilder};
use crate::buf::Buf;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Response, StatusCode};

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
/// - Key error: its 4xx status (400, 401), with `WWW-Authenticate` when
///   the error has a challenge, and a detail naming what was missing or
///   malformed.
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

type BodyCache = std::cell::RefCell<[Option<((usize, usize, u64), Bytes)>; 4]>;

thread_local! {
    static BODY_CACHE: BodyCache = const { std::cell::RefCell::new([const { None }; 4]) };
}

fn problem(buf: &mut Buf<320>, status: StatusCode) {
    buf.push("{\"type\":\"about:blank\",\"title\":")
        .quoted(status.canonical_reason().unwrap_or("Error"))
        .push(",\"status\":")
        .num(u64::from(status.as_u16()))
        .push(",\"detail\":");
}

impl ProblemJson {
    /// The problem+json body for `rejection`, and its status.
    pub fn body(&self, rejection: Rejection<'_>) -> (StatusCode, Bytes) {
        // A limited client gets the same body for a whole second: keep the
        // last few per thread.
        let cache_key = match rejection {
            Rejection::Limited(info) => info.denied().and_then(|d| {
                let secs = ceil_secs(d.decision.retry_after()?).max(1);
                Some((d.name.as_ptr() as usize, d.name.len(), secs))
            }),
            _ => None,
        };
        if let Some(key) = cache_key {
            let hit = BODY_CACHE.with(|c| {
                c.borrow()
                    .iter()
                    .flatten()
                    .find(|e| e.0 == key)
                    .map(|e| e.1.clone())
            });
            if let Some(body) = hit {
                return (StatusCode::TOO_MANY_REQUESTS, body);
            }
        }
        let (status, body) = self.render(rejection);
        if let Some(key) = cache_key {
            BODY_CACHE.with(|c| {
                let mut c = c.borrow_mut();
                c.rotate_right(1);
                c[0] = Some((key, body.clone()));
            });
        }
        (status, body)
    }

    fn render(&self, rejection: Rejection<'_>) -> (StatusCode, Bytes) {
        let mut buf = Buf::<320>::new();
        let status = match rejection {
            Rejection::Limited(info) => {
                let status = StatusCode::TOO_MANY_REQUESTS;
                problem(&mut buf, status);
                match info.denied() {
                    None => {
                        buf.push("\"Rate limit exceeded.\"");
                    }
                    Some(denied) => {
                        let name = denied.name;
                        let d = &denied.decision;
                        match d.retry_after() {
                            Some(wait) => {
                                let secs = ceil_secs(wait).max(1);
                                buf.push("\"Rate limit \\\"")
                                    .escaped(name)
                                    .push("\\\" exceeded: retry in ")
                                    .num(secs)
                                    .push(if secs == 1 {
                                        " second.\""
                                    } else {
                                        " seconds.\""
                                    })
                                    .push(",\"limit\":")
                                    .quoted(name)
                                    .push(",\"retry_after\":")
                                    .num(secs);
                            }
                            None => {
                                buf.push("\"This request costs more than rate limit \\\"")
                                    .escaped(name)
                                    .push("\\\" allows (")
                                    .num(d.limit)
                                    .push(" per window): it can never be admitted.\",\"limit\":")
                                    .quoted(name);
                            }
                        }
                    }
                }
                status
            }
            Rejection::KeyError(e) => {
                let status = e.status();
                problem(&mut buf, status);
                let text = e.to_string();
                let mut chars = text.chars();
                let detail = match chars.next() {
                    Some(first) => format!("{}{}.", first.to_ascii_uppercase(), chars.as_str()),
                    None => text,
                };
                buf.quoted(&detail);
                status
            }
            Rejection::Unavailable(_) => {
                let status = StatusCode::SERVICE_UNAVAILABLE;
                problem(&mut buf, status);
                buf.quoted("The rate limiter is unavailable; try again later.");
                status
            }
        };
        buf.push("}");
        (status, Bytes::copy_from_slice(buf.as_bytes()))
    }
}

impl<B: From<Bytes>> ResponseBuilder<B> for ProblemJson {
    fn build(&self, rejection: Rejection<'_>) -> Response<B> {
        let (status, body) = self.body(rejection);
        let mut res = Response::new(B::from(body));
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
}
