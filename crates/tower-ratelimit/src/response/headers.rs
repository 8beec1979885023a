//! The rate-limit header fields: IETF `RateLimit-Policy` and `RateLimit`, `Retry-After`, and legacy `X-RateLimit-*`.

use super::problem::ceil_secs;
use crate::buf::Buf;
use crate::info::LimitDecision;
use bytes::Bytes;
use http::header::{Entry, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

/// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// Legacy `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// Legacy `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// Legacy `X-RateLimit-Reset` (seconds from now).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Which rate-limit header fields the layer sends.
///
/// With the defaults, every response of a limited route carries the two
/// structured fields of the IETF draft, one list member per limit:
///
/// ```text
/// RateLimit-Policy: "per-minute";q=100;w=60, "per-day";q=1000;w=86400
/// RateLimit: "per-minute";r=42;t=18, "per-day";r=917;t=3600
/// ```
///
/// `q` is the limit, `w` the window in seconds (rounded up), `r` what is
/// left and `t` the seconds (rounded up) until the limit is back to full,
/// or, on a 429, until the request may be retried. A 429 lists only the
/// limit that denied it, and carries `Retry-After` (whole seconds, rounded
/// up, never 0 for a positive wait; absent when the request can never be
/// admitted). Stacked layers append their own members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers {
    ietf: bool,
    on_allowed: bool,
    legacy: bool,
}

impl Default for Headers {
    fn default() -> Self {
        Self::new()
    }
}

impl Headers {
    /// IETF fields on every response, no legacy fields.
    pub const fn new() -> Self {
        Self {
            ietf: true,
            on_allowed: true,
            legacy: false,
        }
    }

    /// No rate-limit fields except `Retry-After` on 429s.
    pub const fn none() -> Self {
        Self {
            ietf: false,
            on_allowed: false,
            legacy: false,
        }
    }

    /// Whether to send the IETF `RateLimit-Policy` and `RateLimit` fields.
    pub const fn ietf(mut self, on: bool) -> Self {
        self.ietf = on;
        self
    }

    /// Whether admitted responses carry the fields too (not only 429s).
    pub const fn on_allowed(mut self, on: bool) -> Self {
        self.on_allowed = on;
        self
    }

    /// Whether to send `X-RateLimit-Limit`, `-Remaining` and `-Reset`
    /// (seconds from now) for the most restrictive limit.
    pub const fn legacy(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

    fn list(&self, entries: &[LimitDecision]) -> Option<(HeaderValue, HeaderValue)> {
        let mut policy = Buf::<128>::new();
        let mut state = Buf::<128>::new();
        for e in entries {
            let d = &e.decision;
            if !policy.is_empty() {
                policy.push(", ");
                state.push(", ");
            }
            let t = match d.retry_after() {
                Some(wait) => ceil_secs(wait).max(1),
                None => ceil_secs(d.reset),
            };
            policy
                .quoted(e.name)
                .push(";q=")
                .num(d.limit)
                .push(";w=")
                .num(ceil_secs(d.window).max(1));
            state
                .quoted(e.name)
                .push(";r=")
                .num(d.remaining)
                .push(";t=")
                .num(t);
        }
        let policy = HeaderValue::from_bytes(policy.as_bytes()).ok()?;
        let state = HeaderValue::from_bytes(state.as_bytes()).ok()?;
        Some((policy, state))
    }

    pub(crate) fn wants_allowed(&self) -> bool {
        self.on_allowed && (self.ietf || self.legacy)
    }

    /// Writes the fields for `entries` (all of one layer). `denied`: the
    /// entry that denied the request, whose fields alone are written.
    pub(crate) fn write(
        &self,
        map: &mut HeaderMap,
        entries: &[LimitDecision],
        denied: Option<usize>,
    ) {
        let entries = match denied {
            Some(i) => {
                let e = &entries[i];
                if let Some(wait) = e.decision.retry_after() {
                    if let Entry::Vacant(slot) = map.entry(RETRY_AFTER) {
                        if let Some(v) = retry_after(ceil_secs(wait).max(1)) {
                            slot.insert(v);
                        }
                    }
                }
                std::slice::from_ref(e)
            }
            None => entries,
        };
        self.render(entries).apply(map);
    }

    /// The fields for `entries`, ready to add to a response.
    pub(crate) fn render(&self, entries: &[LimitDecision]) -> Rendered {
        let mut out = Rendered::default();
        if entries.is_empty() {
            return out;
        }
        if self.ietf {
            out.ietf = if let [e] = entries {
                // One limit: the common case, served from a small cache.
                let d = &e.decision;
                let t = match d.retry_after() {
                    Some(wait) => ceil_secs(wait).max(1),
                    None => ceil_secs(d.reset),
                };
                let w = ceil_secs(d.window).max(1);
                // One thread-local access for both fields.
                CACHES.with(|caches| {
                    let caches = &mut *caches.borrow_mut();
                    let policy = caches.policy.get(e.name, d.limit, w, "q", "w")?;
                    // Repeats for every request of a limited client, and
                    // of clients far below their limit.
                    let state = caches.state.get(e.name, d.remaining, t, "r", "t")?;
                    Some((policy, state))
                })
            } else {
                self.list(entries)
            };
        }
        if self.legacy {
            let e = entries
                .iter()
                .min_by_key(|e| e.decision.remaining)
                .unwrap_or(&entries[0]);
            let d = &e.decision;
            let reset = match d.retry_after() {
                Some(wait) => ceil_secs(wait).max(1),
                None => ceil_secs(d.reset),
            };
            out.legacy = Some(Box::new([
                HeaderValue::from(d.limit),
                HeaderValue::from(d.remaining),
                HeaderValue::from(reset),
            ]));
        }
        out
    }
}

/// Rate-limit fields rendered before the inner service is called, to add
/// to its response: small, so the response future stays small.
#[derive(Default)]
pub(crate) struct Rendered {
    ietf: Option<(HeaderValue, HeaderValue)>,
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl Rendered {
    pub(crate) fn apply(self, map: &mut HeaderMap) {
        if let Some((policy, state)) = self.ietf {
            map.append(RATELIMIT_POLICY, policy);
            map.append(RATELIMIT, state);
        }
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = *legacy;
            map.insert(X_RATELIMIT_LIMIT, limit);
            map.insert(X_RATELIMIT_REMAINING, remaining);
            map.insert(X_RATELIMIT_RESET, reset);
        }
    }
}

/// `"name";k1=a;k2=b`.
fn field(name: &str, a: u64, b: u64, k1: &str, k2: &str) -> Option<HeaderValue> {
    let mut buf = Buf::<128>::new();
    buf.quoted(name).push(";").push(k1).push("=").num(a);
    buf.push(";").push(k2).push("=").num(b);
    HeaderValue::from_bytes(buf.as_bytes()).ok()
}

/// The last few values, the next slot to replace, and the last value
/// missed (a value is kept only when it is missed twice in a row, so that
/// values that never repeat, like a busy client's `r`, cost no copies).
struct Cache {
    entries: [Option<(CacheKey, HeaderValue)>; 4],
    next: usize,
    missed: CacheKey,
    /// Keep values as interned `'static` bytes, whose clones touch no
    /// reference count: for `RateLimit-Policy`, whose values are as many
    /// as the limits configured.
    interned: bool,
}

/// The name's address and length, and the two numbers.
type CacheKey = (usize, usize, u64, u64);

impl Cache {
    const fn new(interned: bool) -> Self {
        Self {
            entries: [const { None }; 4],
            next: 0,
            missed: (0, 0, 0, 0),
            interned,
        }
    }

    /// `"name";k1=a;k2=b`, from the last few values (policies repeat on
    /// every response; a denied client's state repeats for a second), so
    /// the common case costs no formatting or allocation.
    #[inline(always)]
    fn get(
        &mut self,
        name: &'static str,
        a: u64,
        b: u64,
        k1: &str,
        k2: &str,
    ) -> Option<HeaderValue> {
        let id = (name.as_ptr() as usize, name.len(), a, b);
        if let Some(hit) = self.entries.iter().flatten().find(|e| e.0 == id) {
            return Some(hit.1.clone());
        }
        self.miss(id, field(name, a, b, k1, k2)?)
    }

    /// Keeps `value` if `id` was missed just before.
    #[cold]
    fn miss(&mut self, id: CacheKey, value: HeaderValue) -> Option<HeaderValue> {
        if self.missed == id {
            let i = self.next;
            let kept = if self.interned {
                intern(id, &value)
            } else {
                value.clone()
            };
            self.entries[i] = Some((id, kept));
            self.next = (i + 1) % 4;
        } else {
            self.missed = id;
        }
        Some(value)
    }
}

/// `value` as `'static` bytes, leaked once per `id` for the whole process:
/// only for values as few as the configured limits.
fn intern(id: CacheKey, value: &HeaderValue) -> HeaderValue {
    static INTERNED: Mutex<Vec<(CacheKey, &'static [u8])>> = Mutex::new(Vec::new());
    let mut interned = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes = match interned.iter().find(|e| e.0 == id) {
        Some(&(_, bytes)) => bytes,
        None => {
            let bytes: &'static [u8] = Box::leak(value.as_bytes().into());
            interned.push((id, bytes));
            bytes
        }
    };
    // Checked once more, never fails: the bytes come from a `HeaderValue`.
    HeaderValue::from_maybe_shared(Bytes::from_static(bytes)).unwrap_or_else(|_| value.clone())
}

/// Per-thread caches of `RateLimit-Policy` and `RateLimit` values.
struct Caches {
    policy: Cache,
    state: Cache,
}

thread_local! {
    static CACHES: RefCell<Caches> = const {
        RefCell::new(Caches {
            policy: Cache::new(true),
            state: Cache::new(false),
        })
    };
}

/// `Retry-After: secs`, from a per-thread cache of the last value.
fn retry_after(secs: u64) -> Option<HeaderValue> {
    thread_local! {
        static LAST: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((s, v)) = &*last {
            if *s == secs {
                return Some(v.clone());
            }
        }
        let v = HeaderValue::from(secs);
        *last = Some((secs, v.clone()));
        Some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::Decision;
    use std::time::Duration;

    fn entry(
        name: &'static str,
        allowed: bool,
        remaining: u64,
        wait: Option<Duration>,
    ) -> LimitDecision {
        LimitDecision {
            name,
            decision: Decision {
                allowed,
                remaining,
                wait,
                limit: 100,
                window: Duration::from_millis(59_500),
                reset: Duration::from_millis(29_001),
            },
        }
    }

    #[test]
    fn allowed_fields() {
        let mut map = HeaderMap::new();
        let entries = [
            entry("a", true, 7, Some(Duration::ZERO)),
            entry("b\"c", true, 9, Some(Duration::ZERO)),
        ];
        Headers::new().legacy(true).write(&mut map, &entries, None);
        assert_eq!(
            map[RATELIMIT_POLICY],
            r#""a";q=100;w=60, "b\"c";q=100;w=60"#
        );
        assert_eq!(map[RATELIMIT], r#""a";r=7;t=30, "b\"c";r=9;t=30"#);
        assert_eq!(map[X_RATELIMIT_REMAINING], "7");
        assert_eq!(map[X_RATELIMIT_RESET], "30");
        assert!(!map.contains_key(RETRY_AFTER));
    }

    #[test]
    fn denied_fields() {
        let mut map = HeaderMap::new();
        let entries = [
            entry("a", true, 7, Some(Duration::ZERO)),
            entry("b", false, 0, Some(Duration::from_millis(1))),
        ];
        Headers::new().write(&mut map, &entries, Some(1));
        assert_eq!(map[RETRY_AFTER], "1");
        assert_eq!(map[RATELIMIT_POLICY], r#""b";q=100;w=60"#);
        assert_eq!(map[RATELIMIT], r#""b";r=0;t=1"#);
        let mut map = HeaderMap::new();
        Headers::none().write(&mut map, &[entry("n", false, 0, None)], Some(0));
        assert!(map.is_empty());
    }

    #[test]
    fn cached_values_equal_fresh_ones() {
        // Policies are interned after two misses in a row; states are kept
        // as shared copies. Either way every call gives the same value.
        let mut policy = Cache::new(true);
        let mut state = Cache::new(false);
        for _ in 0..4 {
            assert_eq!(
                policy.get("p", 100, 60, "q", "w").unwrap(),
                r#""p";q=100;w=60"#
            );
            assert_eq!(state.get("p", 7, 3, "r", "t").unwrap(), r#""p";r=7;t=3"#);
        }
        assert_eq!(
            policy.get("p", 101, 60, "q", "w").unwrap(),
            r#""p";q=101;w=60"#
        );
        let id = ("p".as_ptr() as usize, 1, 100, 60);
        let value = HeaderValue::from_static("\"p\";q=100;w=60");
        let a = intern(id, &value);
        let b = intern(id, &HeaderValue::from_static("ignored: already interned"));
        assert_eq!(a, value);
        assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
    }
}
