//! Which header the trusted proxies write the client's address to.

use crate::LayerBuildError;
use http::header::{HeaderName, FORWARDED};
use http::request::Parts;
use std::str::FromStr;

/// The `X-Forwarded-For` header's name.
pub(super) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Which header the trusted proxies write the client's address to. Name
/// the one your proxies set (and overwrite or append to): every other
/// header is client-controlled and never read.
///
/// Parses case-insensitively from `x-forwarded-for`, `forwarded`, `either`,
/// or any other header name (a single-value header), as in a
/// `TRUSTED_PROXY_HEADER` variable:
///
/// ```
/// use tower_ratelimit::key::ProxyHeader;
///
/// assert_eq!("Forwarded".parse(), Ok(ProxyHeader::Forwarded));
/// assert_eq!("X-Real-IP".parse(), Ok(ProxyHeader::X_REAL_IP));
/// assert!("not a header".parse::<ProxyHeader>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProxyHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default), which each
    /// proxy appends to.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:4711"`, which
    /// each proxy appends to.
    Forwarded,
    /// `X-Forwarded-For` when the request has one, else `Forwarded`.
    ///
    /// **Risk:** safe only when every trusted proxy sets
    /// `X-Forwarded-For`, or when those that set only `Forwarded` drop a
    /// client's `X-Forwarded-For`. Otherwise a client behind a proxy that
    /// writes only `Forwarded` sends its own `X-Forwarded-For`, which
    /// wins, and picks its key. Prefer naming the one header your proxies
    /// write.
    Either,
    /// A header holding only the client's address, which the trusted
    /// proxy sets, replacing any the client sent (nginx's `X-Real-IP`,
    /// Cloudflare's `CF-Connecting-IP`...). See the constants.
    ///
    /// The trimmed value is one address (`1.2.3.4`, `1.2.3.4:80`, `::1`,
    /// `[::1]:80`). Absent or blank: the peer's address (the trusted proxy).
    /// Several lines: the last one counts (a proxy that appends rather than
    /// replaces adds its line after the client's). `unknown` or an
    /// obfuscated `_name`: the peer's address. Anything else (a list,
    /// garbage, non-ASCII bytes) is a malformed key (400): a trusted proxy
    /// wrote it.
    Single(HeaderName),
}

impl ProxyHeader {
    /// `X-Real-IP` (nginx: `proxy_set_header X-Real-IP $remote_addr`).
    pub const X_REAL_IP: Self = Self::Single(HeaderName::from_static("x-real-ip"));
    /// `CF-Connecting-IP` (Cloudflare).
    pub const CF_CONNECTING_IP: Self = Self::Single(HeaderName::from_static("cf-connecting-ip"));
    /// `True-Client-IP` (Akamai, Cloudflare Enterprise).
    pub const TRUE_CLIENT_IP: Self = Self::Single(HeaderName::from_static("true-client-ip"));
    /// `Fly-Client-IP` (Fly.io).
    pub const FLY_CLIENT_IP: Self = Self::Single(HeaderName::from_static("fly-client-ip"));

    /// The header's name (`x-forwarded-for`; `either` for [`Either`](Self::Either)).
    pub fn name(&self) -> &str {
        match self {
            Self::XForwardedFor => "x-forwarded-for",
            Self::Forwarded => "forwarded",
            Self::Either => "either",
            Self::Single(name) => name.as_str(),
        }
    }

    /// Whether `req` carries this header (either, for `Either`).
    pub(super) fn is_in(&self, req: &Parts) -> bool {
        match self {
            Self::XForwardedFor => req.headers.contains_key(X_FORWARDED_FOR),
            Self::Forwarded => req.headers.contains_key(FORWARDED),
            Self::Either => {
                req.headers.contains_key(X_FORWARDED_FOR) || req.headers.contains_key(FORWARDED)
            }
            Self::Single(name) => req.headers.contains_key(name),
        }
    }
}

impl FromStr for ProxyHeader {
    type Err = LayerBuildError;

    /// `x-forwarded-for`, `forwarded`, `either` (any case), or another
    /// header name; the error names the rejected text.
    fn from_str(s: &str) -> Result<Self, LayerBuildError> {
        let name = s.trim();
        Ok(if name.eq_ignore_ascii_case("x-forwarded-for") {
            Self::XForwardedFor
        } else if name.eq_ignore_ascii_case("forwarded") {
            Self::Forwarded
        } else if name.eq_ignore_ascii_case("either") {
            Self::Either
        } else {
            HeaderName::from_bytes(name.as_bytes())
                .map(Self::Single)
                .map_err(|_| LayerBuildError::BadProxyHeader(s.to_owned()))?
        })
    }
}
