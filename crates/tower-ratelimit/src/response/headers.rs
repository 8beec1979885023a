//! The rate-limit header fields: IETF `RateLimit-Policy` and `RateLimit`, `Retry-After`, and legacy `X-RateLimit-*`.

use super::memo::{next_id, Memo};
use bytes::Bytes;
use http::header::{Entry, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use ratelimit_core::plumbing::ceil_secs;
use ratelimit_core::Decision;
use std::cell::RefCell;
use std::sync::OnceLock;

/// `(limit id, r, t, q, w)`.
type FieldsKey = (u64, u64, u64, u64, u64);

thread_local! {
    /// `RateLimit-Policy` and `RateLimit` values of one limit, by
    /// `(limit id, r, t, q, w)`.
    static FIELDS: RefCell<Memo<FieldsKey, (HeaderValue, HeaderValue), 4>> =
        const { RefCell::new(Memo::new()) };
    /// `Retry-After` values, by seconds.
    static RETRY_AFTER_VALUES: RefCell<Memo<u64, HeaderValue, 2>> =
        const { RefCell::new(Memo::new()) };
}

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
/// left and `t` the seconds (rounded up) until the limit is back to full;
/// with nothing left (`r=0`), until the next unit is (what `Retry-After`
/// would say to a request denied then), and on a 429, until the request
/// may be retried (the instant of `Retry-After`). A 429 lists only the
/// limit that denied it, and carries `Retry-After` (whole seconds, rounded
/// up, never 0 for a positive wait; absent when the request can never be
/// admitted). Stacked layers append their own members.
///
/// With feature `table` it is read from a name: `ietf` (the default),
/// `legacy`, `both` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "table", derive(serde::Deserialize), serde(from = "Named"))]
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

    pub(crate) fn wants_allowed(&self) -> bool {
        self.on_allowed && (self.ietf || self.legacy)
    }
}

/// The sets of fields [`Headers`] is read from, by name.
#[cfg(feature = "table")]
#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Named {
    Ietf,
    Legacy,
    Both,
    None,
}

#[cfg(feature = "table")]
impl From<Named> for Headers {
    fn from(named: Named) -> Self {
        match named {
            Named::Ietf => Headers::new(),
            Named::Legacy => Headers::new().ietf(false).legacy(true),
            Named::Both => Headers::new().legacy(true),
            Named::None => Headers::none(),
        }
    }
}

/// `t` of a decision, in whole seconds rounded up (as `Retry-After`).
///
/// draft-ietf-httpapi-ratelimit-headers-10, Section 4.1.2 (Reset
/// Parameter): "the number of seconds until the quota associated with the
/// quota policy resets"; Section 5 (Server Behavior): with `Retry-After`,
/// `t` "SHOULD reference the same point in time". So:
/// - a denial: the wait for this request, the instant of `Retry-After`;
/// - admitted with `r=0`: the wait until the next unit of quota
///   ([`Decision::next`]), which is the `Retry-After` a request of cost 1
///   denied at this instant is given: the two never disagree;
/// - admitted with `r>0`: the wait until the quota is back to full
///   ([`Decision::reset`]), when the quota has reset, so that "do not
///   spend more than `r` in the next `t` seconds" (Section 6) holds;
/// - a denial that can never be admitted (its cost is above the capacity):
///   no `Retry-After`, and `t` the wait until the quota is back to full,
///   or the window when it is full already, never 0: a client reading it
///   is not told to retry at once, and the problem body says the request
///   can never be admitted.
pub(crate) fn reset_secs(d: &Decision) -> u64 {
    match d.retry_after() {
        Some(wait) => ceil_secs(wait).max(1),
        None if d.is_never() && d.reset.is_zero() => ceil_secs(d.window).max(1),
        None if d.is_never() => ceil_secs(d.reset).max(1),
        None if d.remaining == 0 && !d.next.is_zero() => ceil_secs(d.next),
        None => ceil_secs(d.reset),
    }
}

/// A field value made of `parts`, in one allocation of exactly their
/// length (which `Bytes` then takes over as it is, with no copy and no
/// second allocation), checked once by `from_maybe_shared`.
fn value(parts: &[&[u8]]) -> Option<HeaderValue> {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut v = Vec::with_capacity(len);
    for p in parts {
        v.extend_from_slice(p);
    }
    HeaderValue::from_maybe_shared(Bytes::from(v)).ok()
}

/// A number as a field value (`Retry-After`, legacy fields).
fn number(n: u64) -> Option<HeaderValue> {
    value(&[itoa::Buffer::new().format(n).as_bytes()])
}

/// The decimal digits of 0 to 60, two each (`00` to `60`): the one or two
/// digits of such a number are a slice of it.
const UP_TO_A_MINUTE: &str = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960";

/// The `Retry-After` value of `secs`: up to a minute a slice of a static
/// string (no allocation, and its clones touch no reference count), beyond
/// from the memo of this thread.
fn retry_after(secs: u64) -> Option<HeaderValue> {
    match usize::try_from(secs) {
        Ok(n) if n <= 60 => {
            let start = if n < 10 { 2 * n + 1 } else { 2 * n };
            Some(HeaderValue::from_static(&UP_TO_A_MINUTE[start..2 * n + 2]))
        }
        _ => Memo::get(&RETRY_AFTER_VALUES, secs, || number(secs)),
    }
}

/// `s` as a structured-field String (RFC 8941, Section 4.1.6): quoted, `"`
/// and `\` escaped; `None` for characters outside printable ASCII (limit
/// names are checked for that when the layer is built).
fn sf_string(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for b in s.bytes() {
        if !(0x20..=0x7e).contains(&b) {
            return None;
        }
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    Some(out)
}

/// The parts of one limit's fields that its settings fix.
struct LimitFields {
    /// Tells the limit in the per-thread memos.
    id: u64,
    /// `"name"`.
    name: Box<[u8]>,
    /// `"name";r=`: the start of its `RateLimit` member.
    state: Box<[u8]>,
    /// Its `RateLimit-Policy` member, `"name";q=L;w=W`, with the `q` and
    /// `w` it was rendered for. `q` and `w` come from the store's
    /// decisions, so it is rendered at the first one and kept as long as
    /// they stay the same (always, unless the store changes its setting).
    policy: OnceLock<(u64, u64, Option<HeaderValue>)>,
}

impl LimitFields {
    fn new(name: &str) -> Option<Self> {
        let name = sf_string(name)?;
        let mut state = name.clone();
        state.extend_from_slice(b";r=");
        Some(Self {
            id: next_id(),
            name: name.into(),
            state: state.into(),
            policy: OnceLock::new(),
        })
    }

    fn write_policy(&self, out: &mut Vec<u8>, q: u64, w: u64) {
        out.extend_from_slice(&self.name);
        out.extend_from_slice(b";q=");
        out.extend_from_slice(itoa::Buffer::new().format(q).as_bytes());
        out.extend_from_slice(b";w=");
        out.extend_from_slice(itoa::Buffer::new().format(w).as_bytes());
    }

    fn write_state(&self, out: &mut Vec<u8>, d: &Decision) {
        out.extend_from_slice(&self.state);
        out.extend_from_slice(itoa::Buffer::new().format(d.remaining).as_bytes());
        out.extend_from_slice(b";t=");
        out.extend_from_slice(itoa::Buffer::new().format(reset_secs(d)).as_bytes());
    }

    /// The `RateLimit-Policy` value of this limit alone.
    fn policy(&self, d: &Decision) -> Option<HeaderValue> {
        let w = ceil_secs(d.window).max(1);
        let render = || {
            let mut out = Vec::new();
            self.write_policy(&mut out, d.limit, w);
            out
        };
        let (q, pw, v) = self.policy.get_or_init(|| {
            // Kept for the life of the program, like the limit's name (once
            // per limit): its clones then touch no reference count.
            let bytes: &'static [u8] = Box::leak(render().into_boxed_slice());
            (
                d.limit,
                w,
                HeaderValue::from_maybe_shared(Bytes::from_static(bytes)).ok(),
            )
        });
        if (*q, *pw) == (d.limit, w) {
            v.clone()
        } else {
            HeaderValue::from_maybe_shared(Bytes::from(render())).ok()
        }
    }

    /// The `RateLimit-Policy` and `RateLimit` values of this limit alone:
    /// of the second, only two numbers after a fixed prefix are written.
    fn both(&self, d: &Decision) -> Option<(HeaderValue, HeaderValue)> {
        let t = reset_secs(d);
        let w = ceil_secs(d.window).max(1);
        Memo::get(&FIELDS, (self.id, d.remaining, t, d.limit, w), || {
            let (mut rb, mut tb) = (itoa::Buffer::new(), itoa::Buffer::new());
            let state = value(&[
                &self.state,
                rb.format(d.remaining).as_bytes(),
                b";t=",
                tb.format(t).as_bytes(),
            ])?;
            Some((self.policy(d)?, state))
        })
    }
}

/// A layer's [`Headers`] with what its settings fix in the fields
/// (quoted names, `RateLimit-Policy` values) rendered once, when the layer
/// is built.
pub(crate) struct Fields {
    headers: Headers,
    limits: Box<[LimitFields]>,
}

impl Fields {
    /// `None` if a name is not printable ASCII (the builder checks first).
    pub(crate) fn new<'a>(
        headers: Headers,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Option<Self> {
        Some(Self {
            headers,
            limits: names
                .into_iter()
                .map(LimitFields::new)
                .collect::<Option<_>>()?,
        })
    }

    pub(crate) fn wants_allowed(&self) -> bool {
        self.headers.wants_allowed()
    }

    /// Writes the fields for `entries` (`(limit index, decision)`, all of
    /// this layer). `denied`: the entry that denied the request, whose
    /// fields alone are written, with `Retry-After`.
    pub(crate) fn write(
        &self,
        map: &mut HeaderMap,
        entries: &[(usize, Decision)],
        denied: Option<usize>,
    ) {
        let fields = match denied {
            Some(i) => {
                let (limit, d) = &entries[i];
                if let Some(wait) = d.retry_after() {
                    if let Entry::Vacant(slot) = map.entry(RETRY_AFTER) {
                        let secs = ceil_secs(wait).max(1);
                        if let Some(v) = retry_after(secs) {
                            slot.insert(v);
                        }
                    }
                }
                self.render_one(*limit, d)
            }
            None => self.render(entries),
        };
        fields.apply(map);
    }

    /// The fields for `entries`, ready to add to a response.
    pub(crate) fn render(&self, entries: &[(usize, Decision)]) -> Rendered {
        let mut out = Rendered::default();
        match entries {
            [] => return out,
            [(i, d)] => return self.render_one(*i, d),
            _ => {}
        }
        if self.headers.ietf {
            out.ietf = self.list(entries);
        }
        if self.headers.legacy {
            let (_, d) = entries
                .iter()
                .min_by_key(|(_, d)| d.remaining)
                .unwrap_or(&entries[0]);
            out.legacy = legacy(d);
        }
        out
    }

    /// The fields for the decision `d` of limit `i` alone.
    pub(crate) fn render_one(&self, i: usize, d: &Decision) -> Rendered {
        Rendered {
            ietf: if self.headers.ietf {
                self.limits[i].both(d)
            } else {
                None
            },
            legacy: if self.headers.legacy { legacy(d) } else { None },
        }
    }

    /// Both IETF fields for several limits: lists of one member each.
    fn list(&self, entries: &[(usize, Decision)]) -> Option<(HeaderValue, HeaderValue)> {
        let mut policy = Vec::with_capacity(32 * entries.len());
        let mut state = Vec::with_capacity(32 * entries.len());
        for (n, (i, d)) in entries.iter().enumerate() {
            let limit = &self.limits[*i];
            if n > 0 {
                policy.extend_from_slice(b", ");
                state.extend_from_slice(b", ");
            }
            limit.write_policy(&mut policy, d.limit, ceil_secs(d.window).max(1));
            limit.write_state(&mut state, d);
        }
        let policy = HeaderValue::from_maybe_shared(Bytes::from(policy)).ok()?;
        let state = HeaderValue::from_maybe_shared(Bytes::from(state)).ok()?;
        Some((policy, state))
    }
}

/// The legacy fields of the decision `d`.
fn legacy(d: &Decision) -> Option<Box<[HeaderValue; 3]>> {
    number(d.limit)
        .zip(number(d.remaining))
        .zip(number(reset_secs(d)))
        .map(|((l, r), t)| Box::new([l, r, t]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn retry_after_values_are_the_seconds_in_decimal() {
        for secs in [0u64, 1, 9, 10, 11, 59, 60, 61, 86_400, u64::MAX] {
            let v = retry_after(secs).unwrap();
            assert_eq!(v.to_str().unwrap(), secs.to_string());
        }
    }

    fn decision(allowed: bool, remaining: u64, wait: Option<Duration>) -> Decision {
        Decision::new(
            allowed,
            remaining,
            wait,
            100,
            Duration::from_millis(59_500),
            Duration::from_millis(29_001),
            if remaining == 0 {
                Duration::from_millis(2_500)
            } else {
                Duration::ZERO
            },
        )
    }

    fn fields(names: &[&str]) -> Fields {
        Fields::new(Headers::new().legacy(true), names.iter().copied()).unwrap()
    }

    #[test]
    fn allowed_fields() {
        let mut map = HeaderMap::new();
        let entries = [
            (0, decision(true, 7, Some(Duration::ZERO))),
            (1, decision(true, 9, Some(Duration::ZERO))),
        ];
        fields(&["a", "b\"c"]).write(&mut map, &entries, None);
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
    fn nothing_left_says_when_the_next_unit_is() {
        let mut map = HeaderMap::new();
        let f = fields(&["a\\b"]);
        f.write(
            &mut map,
            &[(0, decision(true, 0, Some(Duration::ZERO)))],
            None,
        );
        assert_eq!(map[RATELIMIT], r#""a\\b";r=0;t=3"#);
        assert_eq!(map[X_RATELIMIT_RESET], "3");
        // The policy value is kept; a changed setting renders afresh.
        let mut again = HeaderMap::new();
        let mut d = decision(true, 5, Some(Duration::ZERO));
        f.write(&mut again, &[(0, d)], None);
        assert_eq!(again[RATELIMIT_POLICY], r#""a\\b";q=100;w=60"#);
        d.limit = 7;
        let mut changed = HeaderMap::new();
        f.write(&mut changed, &[(0, d)], None);
        assert_eq!(changed[RATELIMIT_POLICY], r#""a\\b";q=7;w=60"#);
    }

    #[test]
    fn denied_fields() {
        let mut map = HeaderMap::new();
        let entries = [
            (0, decision(true, 7, Some(Duration::ZERO))),
            (1, decision(false, 0, Some(Duration::from_millis(1)))),
        ];
        let f = Fields::new(Headers::new(), ["a", "b"]).unwrap();
        f.write(&mut map, &entries, Some(1));
        assert_eq!(map[RETRY_AFTER], "1");
        assert_eq!(map[RATELIMIT_POLICY], r#""b";q=100;w=60"#);
        assert_eq!(map[RATELIMIT], r#""b";r=0;t=1"#);
        let mut map = HeaderMap::new();
        let none = Fields::new(Headers::none(), ["n"]).unwrap();
        none.write(&mut map, &[(0, decision(false, 0, None))], Some(0));
        assert!(map.is_empty());
    }

    #[test]
    fn names_outside_printable_ascii_are_refused() {
        assert!(Fields::new(Headers::new(), ["caf\u{e9}"]).is_none());
        assert!(Fields::new(Headers::new(), ["tab\there"]).is_none());
    }
}
