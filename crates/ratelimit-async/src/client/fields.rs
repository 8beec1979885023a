//! What a server says about its limits: `Retry-After` and the IETF
//! `RateLimit` / `RateLimit-Policy` fields
//! (draft-ietf-httpapi-ratelimit-headers-10).

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName};
use sfv::{BareItem, ListEntry, Parser};
use std::time::{Duration, SystemTime};

/// The `RateLimit` field.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// The `RateLimit-Policy` field.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// `Retry-After` as a wait from `now` (the wall clock, for the HTTP-date
/// form): whole seconds (`120`) or an HTTP-date (`Wed, 21 Oct 2015
/// 07:28:00 GMT`; a date in the past is a wait of 0). `None` when absent
/// or unreadable (then it is ignored, as RFC 9110 allows). With several
/// fields, the last one counts.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get_all(RETRY_AFTER).iter().next_back()?;
    let text = value.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate absurd values rather than fail on them.
        return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// One policy's state from a `RateLimit` field: `"name";r=REMAINING;t=SECONDS`.
///
/// ```
/// use http::HeaderMap;
/// use ratelimit_async::client::{quotas, Quota};
/// use std::time::Duration;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", "\"api\";r=0;t=12".parse().unwrap());
/// let quota = Quota { policy: "api".into(), remaining: 0, reset: Some(Duration::from_secs(12)) };
/// assert_eq!(quotas(&headers), vec![quota]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// The policy's name (a string or token), empty when it is neither.
    pub policy: String,
    /// `r`: the quota units left.
    pub remaining: u64,
    /// `t`: seconds until more quota is available, when given.
    pub reset: Option<Duration>,
}

/// One policy from a `RateLimit-Policy` field: `"name";q=QUOTA;w=WINDOW`.
///
/// ```
/// use http::HeaderMap;
/// use ratelimit_async::client::{policies, Policy};
/// use std::time::Duration;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit-policy", "\"api\";q=100;w=60".parse().unwrap());
/// let policy = Policy { policy: "api".into(), quota: 100, window: Some(Duration::from_secs(60)) };
/// assert_eq!(policies(&headers), vec![policy]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The policy's name.
    pub policy: String,
    /// `q`: the quota.
    pub quota: u64,
    /// `w`: the window, when given.
    pub window: Option<Duration>,
}

fn name(item: &BareItem) -> String {
    match item {
        BareItem::String(s) => s.as_str().to_owned(),
        BareItem::Token(t) => t.as_str().to_owned(),
        _ => String::new(),
    }
}

fn non_negative(item: Option<&BareItem>) -> Option<u64> {
    item?
        .as_integer()
        .and_then(|i| u64::try_from(i64::from(i)).ok())
}

/// Every item of the structured list in the fields named `name` (their
/// lines joined, as RFC 9651 says), or none when the list does not parse.
fn list(headers: &HeaderMap, name: &HeaderName) -> Vec<sfv::Item> {
    let mut joined = Vec::new();
    for line in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    if joined.is_empty() {
        return Vec::new();
    }
    match Parser::new(&joined).parse::<sfv::List>() {
        Ok(list) => list
            .into_iter()
            .filter_map(|entry| match entry {
                ListEntry::Item(item) => Some(item),
                ListEntry::InnerList(_) => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The policies' states in `RateLimit`; items without a valid `r` are
/// skipped, and an unparsable field gives none.
pub fn quotas(headers: &HeaderMap) -> Vec<Quota> {
    list(headers, &RATELIMIT)
        .into_iter()
        .filter_map(|item| {
            Some(Quota {
                policy: name(&item.bare_item),
                remaining: non_negative(item.params.get("r"))?,
                reset: non_negative(item.params.get("t")).map(Duration::from_secs),
            })
        })
        .collect()
}

/// The policies in `RateLimit-Policy`; items without a valid `q` are
/// skipped, and an unparsable field gives none.
pub fn policies(headers: &HeaderMap) -> Vec<Policy> {
    list(headers, &RATELIMIT_POLICY)
        .into_iter()
        .filter_map(|item| {
            Some(Policy {
                policy: name(&item.bare_item),
                quota: non_negative(item.params.get("q"))?,
                window: non_negative(item.params.get("w")).map(Duration::from_secs),
            })
        })
        .collect()
}

/// How long the next request to this server should be held, from the
/// `RateLimit` field: the longest `t` of a policy with `r=0` (its
/// `RateLimit-Policy` window when `t` is missing), or `None` when every
/// policy has quota left.
pub fn exhausted_for(headers: &HeaderMap) -> Option<Duration> {
    let exhausted: Vec<Quota> = quotas(headers)
        .into_iter()
        .filter(|q| q.remaining == 0)
        .collect();
    if exhausted.is_empty() {
        return None;
    }
    let windows = policies(headers);
    exhausted
        .iter()
        .filter_map(|q| {
            q.reset.or_else(|| {
                windows
                    .iter()
                    .find(|p| p.policy == q.policy)
                    .and_then(|p| p.window)
            })
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(fields: &[(&HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in fields {
            h.append((*name).clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_000);
        let h = headers(&[(&RETRY_AFTER, " 120 ")]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(120)));
        // 2015-10-21 07:28:00 is 480 s after `now`.
        let h = headers(&[(&RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(480)));
        let past = now + Duration::from_secs(3600);
        assert_eq!(retry_after(&h, past), Some(Duration::ZERO));
        for bad in ["", "soon", "-5", "1.5", "Wed, 32 Oct 2015 07:28:00 GMT"] {
            assert_eq!(
                retry_after(&headers(&[(&RETRY_AFTER, bad)]), now),
                None,
                "{bad}"
            );
        }
        let huge = headers(&[(&RETRY_AFTER, "99999999999999999999999")]);
        assert_eq!(retry_after(&huge, now), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn ratelimit_fields_as_the_draft_writes_them() {
        let h = headers(&[
            (&RATELIMIT_POLICY, "\"anonymous\";q=10;w=60, burst;q=100"),
            (&RATELIMIT, "\"anonymous\";r=0;t=6"),
            (&RATELIMIT, "burst;r=50;t=1"),
        ]);
        assert_eq!(
            quotas(&h),
            vec![
                Quota {
                    policy: "anonymous".into(),
                    remaining: 0,
                    reset: Some(Duration::from_secs(6))
                },
                Quota {
                    policy: "burst".into(),
                    remaining: 50,
                    reset: Some(Duration::from_secs(1))
                },
            ]
        );
        assert_eq!(
            policies(&h),
            vec![
                Policy {
                    policy: "anonymous".into(),
                    quota: 10,
                    window: Some(Duration::from_secs(60))
                },
                Policy {
                    policy: "burst".into(),
                    quota: 100,
                    window: None
                },
            ]
        );
        assert_eq!(exhausted_for(&h), Some(Duration::from_secs(6)));
    }

    #[test]
    fn an_exhausted_policy_without_t_holds_for_its_window() {
        let h = headers(&[
            (&RATELIMIT_POLICY, "\"day\";q=2;w=86400"),
            (&RATELIMIT, "\"day\";r=0"),
        ]);
        assert_eq!(exhausted_for(&h), Some(Duration::from_secs(86_400)));
        let h = headers(&[(&RATELIMIT, "\"day\";r=0")]);
        assert_eq!(exhausted_for(&h), None);
    }

    #[test]
    fn quota_left_or_garbage_holds_nothing() {
        for value in [
            "\"a\";r=3;t=10",
            "\"a\";r=-1;t=5",
            "\"a\";t=5",
            "((",
            "\"a\";r=0;t=\"x\"",
        ] {
            assert_eq!(
                exhausted_for(&headers(&[(&RATELIMIT, value)])),
                None,
                "{value}"
            );
        }
        assert_eq!(exhausted_for(&HeaderMap::new()), None);
    }
}
