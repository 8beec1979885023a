//! The default rejection: RFC 9457 `application/problem+json` bodies.

use super::memo::Memo;
use super::{Rejection, ResponseBuilder};
use crate::key::KeyError;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Response, StatusCode};
use ratelimit_core::plumbing::ceil_secs;
use ratelimit_core::Decision;
use std::cell::RefCell;
use std::rc::Rc;

thread_local! {
    /// 429 bodies of one limit, by `(limit name, seconds)`: a limited
    /// client gets the same body for a whole second.
    static BODIES: RefCell<Memo<(Name, u64), Bytes, 4>> = const { RefCell::new(Memo::new()) };
    /// The fixed parts of the 429 bodies of a few limits, by name.
    static PARTS: RefCell<Memo<Name, Rc<LimitedBody>, 4>> = const { RefCell::new(Memo::new()) };
}

/// A limit's name as a memo's key: equal names are one key (the same
/// name, as every decision of a layer's limit carries, is told at once).
#[derive(Clone, Copy)]
struct Name(&'static str);

impl PartialEq for Name {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) || self.0 == other.0
    }
}

impl Eq for Name {}

/// `application/problem+json`.
pub const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The default [`ResponseBuilder`]: RFC 9457 problem details, for any body
/// type that can be made from [`Bytes`] (axum's `Body`, `Full<Bytes>`,
/// `Bytes`...).
///
/// ```
/// use bytes::Bytes;
/// use http::{header, StatusCode};
/// use tower_ratelimit::key::KeyError;
/// use tower_ratelimit::response::{ProblemJson, Rejection, ResponseBuilder, PROBLEM_JSON};
///
/// let no_token = KeyError::missing("authorization")
///     .with_status(StatusCode::UNAUTHORIZED)
///     .with_challenge("Bearer");
/// let res: http::Response<Bytes> = ProblemJson::new().build(Rejection::KeyError(&no_token));
/// assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
/// assert_eq!(res.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
/// assert_eq!(res.headers()[header::WWW_AUTHENTICATE], "Bearer");
/// ```
///
/// - Limited: `429 Too Many Requests`, body
///   `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"...","limit":"name","retry_after":12}`
///   (`retry_after` in whole seconds, rounded up, as in the `Retry-After`
///   header). A request whose cost exceeds the limit's capacity can never be
///   admitted: it also gets 429, but without `Retry-After` or
///   `retry_after`, and a detail saying so (retrying cannot help).
/// - Banned (the limit's `ban`, see
///   [`BanPolicy`](ratelimit_core::BanPolicy)): the same 429, its
///   `Retry-After` and `retry_after` the ban's remaining time, a detail
///   saying it is a ban, and `"banned":true`.
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

/// `s` as a JSON string.
fn json(s: &str) -> String {
    // A `&str` always serializes.
    serde_json::to_string(s).unwrap_or_default()
}

/// The JSON string of `s`, less its closing quote: a string to be
/// continued. (JSON escapes character by character, so the pieces of a
/// string escape as the whole does.)
fn open(s: &str) -> String {
    let mut j = json(s);
    j.pop();
    j
}

/// The JSON string of `s`, less its opening quote: the end of a string.
fn close(s: &str) -> String {
    json(s)[1..].to_owned()
}

/// `{"type":"about:blank","title":"...","status":NNN,"detail":`.
fn head(status: StatusCode) -> String {
    format!(
        "{{\"type\":\"about:blank\",\"title\":{},\"status\":{},\"detail\":",
        json(status.canonical_reason().unwrap_or("Error")),
        status.as_u16()
    )
}

/// A body of `parts` and numbers, in one allocation of exactly its length.
fn body(parts: &[&[u8]]) -> Bytes {
    let mut v = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        v.extend_from_slice(p);
    }
    Bytes::from(v)
}

/// The parts of a limit's 429 bodies that its name fixes, rendered (and
/// escaped, by `serde_json`) once per thread for its last few limits; per
/// request only the numbers are written between them.
#[derive(Debug)]
struct LimitedBody {
    /// Up to `retry in `.
    retry: Box<[u8]>,
    /// From ` seconds.` to `"retry_after":`, and the same with `second`.
    retry_mid: [Box<[u8]>; 2],
    /// A request that can never be admitted: up to the limit, and after it.
    never: [Box<[u8]>; 2],
    /// A banned key's body: up to the seconds, between them, and after.
    ban: [Box<[u8]>; 3],
}

impl LimitedBody {
    /// The parts of the limit `name`.
    fn new(name: &str) -> Self {
        let head = head(StatusCode::TOO_MANY_REQUESTS);
        let limit = json(name);
        let mid = |unit: &str| {
            format!(
                "{},\"limit\":{limit},\"retry_after\":",
                close(&format!(" {unit}."))
            )
        };
        Self {
            retry: format!(
                "{head}{}",
                open(&format!("Rate limit \"{name}\" exceeded: retry in "))
            )
            .into_bytes()
            .into(),
            retry_mid: [mid("seconds"), mid("second")].map(|s| s.into_bytes().into()),
            never: [
                format!(
                    "{head}{}",
                    open(&format!(
                        "This request costs more than rate limit \"{name}\" allows ("
                    ))
                ),
                format!(
                    "{},\"limit\":{limit}}}",
                    close(" per window): it can never be admitted.")
                ),
            ]
            .map(|s| s.into_bytes().into()),
            ban: [
                format!(
                    "{head}{}",
                    open(&format!(
                        "Banned by rate limit \"{name}\" after exceeding it: retry in "
                    ))
                ),
                format!("{},\"limit\":{limit},\"retry_after\":", close(" seconds.")),
                ",\"banned\":true}".to_owned(),
            ]
            .map(|s| s.into_bytes().into()),
        }
    }

    /// The parts of the limit `name`, kept by this thread for its last
    /// few limits.
    fn of(name: &'static str) -> Rc<Self> {
        Memo::keep(&PARTS, Name(name), || Rc::new(Self::new(name)))
    }

    /// The body of the limit `name`'s decision `d`.
    fn render(name: &'static str, d: &Decision) -> Bytes {
        if d.banned {
            let secs = ceil_secs(d.wait.unwrap_or_default()).max(1);
            let mut n = itoa::Buffer::new();
            let n = n.format(secs).as_bytes();
            let ban = &Self::of(name).ban;
            return body(&[&ban[0], n, &ban[1], n, &ban[2]]);
        }
        match d.retry_after() {
            Some(wait) => {
                let secs = ceil_secs(wait).max(1);
                let make = || {
                    let parts = Self::of(name);
                    let mut n = itoa::Buffer::new();
                    let n = n.format(secs).as_bytes();
                    let mid = &parts.retry_mid[usize::from(secs == 1)];
                    Some(body(&[&parts.retry, n, mid, n, b"}"]))
                };
                Memo::get(&BODIES, (Name(name), secs), make).unwrap_or_default()
            }
            None => {
                let never = &Self::of(name).never;
                let mut n = itoa::Buffer::new();
                body(&[&never[0], n.format(d.limit).as_bytes(), &never[1]])
            }
        }
    }
}

impl ProblemJson {
    /// The problem+json body for `rejection`, and its status.
    pub fn body(&self, rejection: Rejection<'_>) -> (StatusCode, Bytes) {
        match rejection {
            Rejection::Limited(info) => {
                let status = StatusCode::TOO_MANY_REQUESTS;
                let body = match info.denied() {
                    Some(denied) => LimitedBody::render(denied.name, &denied.decision),
                    None => problem(status, "Rate limit exceeded."),
                };
                (status, body)
            }
            Rejection::KeyError(e) => {
                let status = e.status();
                (status, problem(status, &key_error_detail(e)))
            }
            Rejection::Unavailable(_) => {
                let status = StatusCode::SERVICE_UNAVAILABLE;
                let detail = "The rate limiter is unavailable; try again later.";
                (status, problem(status, detail))
            }
        }
    }
}

/// What a key error tells the client: `Missing bearer token.`
pub(crate) fn key_error_detail(e: &KeyError) -> String {
    let text = e.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_ascii_uppercase(), chars.as_str()),
        None => text,
    }
}

/// A whole body with a `detail`, for the rarer rejections.
fn problem(status: StatusCode, detail: &str) -> Bytes {
    body(&[head(status).as_bytes(), json(detail).as_bytes(), b"}"])
}

impl<B: From<Bytes>> ResponseBuilder<B> for ProblemJson {
    fn build(&self, rejection: Rejection<'_>) -> Response<B> {
        let (status, body) = self.body(rejection);
        let mut res = Response::new(B::from(body));
        *res.status_mut() = status;
        res.headers_mut().append(CONTENT_TYPE, PROBLEM_JSON);
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

    fn denied(wait: Option<Duration>) -> Decision {
        let window = Duration::from_secs(60);
        Decision::new(false, 0, wait, 5, window, window, Duration::from_secs(1))
    }

    fn parsed(body: &Bytes) -> serde_json::Value {
        serde_json::from_slice(body).unwrap()
    }

    #[test]
    fn limited_bodies_are_json_with_the_name_escaped() {
        let name = "a \"quoted\" \\ name";
        let body = parsed(&LimitedBody::render(
            name,
            &denied(Some(Duration::from_millis(11_500))),
        ));
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["title"], "Too Many Requests");
        assert_eq!(body["status"], 429);
        assert_eq!(body["limit"], name);
        assert_eq!(body["retry_after"], 12);
        assert_eq!(
            body["detail"],
            format!("Rate limit \"{name}\" exceeded: retry in 12 seconds.")
        );
        let one = parsed(&LimitedBody::render(
            name,
            &denied(Some(Duration::from_millis(1))),
        ));
        assert_eq!(one["retry_after"], 1);
        assert!(one["detail"]
            .as_str()
            .unwrap()
            .ends_with("retry in 1 second."));
        let never = parsed(&LimitedBody::render(name, &denied(None)));
        assert_eq!(never["limit"], name);
        assert!(never.get("retry_after").is_none());
        assert_eq!(
            never["detail"],
            format!(
                "This request costs more than rate limit \"{name}\" allows (5 per window): \
                 it can never be admitted."
            )
        );
    }

    #[test]
    fn a_ban_says_so() {
        let name = "login";
        let window = Duration::from_secs(60);
        let d = Decision::ban(5, window, Duration::from_millis(3_599_500));
        let body = parsed(&LimitedBody::render(name, &d));
        assert_eq!(body["status"], 429);
        assert_eq!(body["banned"], true);
        assert_eq!(body["retry_after"], 3600);
        assert_eq!(body["limit"], "login");
        assert_eq!(
            body["detail"],
            "Banned by rate limit \"login\" after exceeding it: retry in 3600 seconds."
        );
    }

    #[test]
    fn other_bodies() {
        let body = parsed(&problem(StatusCode::SERVICE_UNAVAILABLE, "a \"b\"\n"));
        assert_eq!(body["status"], 503);
        assert_eq!(body["title"], "Service Unavailable");
        assert_eq!(body["detail"], "a \"b\"\n");
    }

    #[test]
    fn rounding_up() {
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(999)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }
}
