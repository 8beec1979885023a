//! Configuration errors of the layer and its extractors.

use std::fmt;

/// A layer or extractor setting that cannot work. Constructors and
/// [`RateLimitBuilder::build`](crate::RateLimitBuilder::build) return it;
/// nothing panics on bad configuration.
///
/// ```
/// use tower_ratelimit::{key::Global, Gcra, LayerBuildError, MemoryStore, RateLimitLayer};
///
/// let err = RateLimitLayer::<_, MemoryStore<Gcra, _>>::builder(Global).build().unwrap_err();
/// assert_eq!(err, LayerBuildError::NoLimits);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayerBuildError {
    /// No limit was added.
    NoLimits,
    /// More than 64 limits on one layer.
    TooManyLimits(usize),
    /// A limit name that breaks the rule
    /// ([`is_valid_limit_name`](ratelimit_core::plumbing::is_valid_limit_name)): 1 to
    /// 64 visible ASCII characters, without quotes or braces.
    BadLimitName(String),
    /// Two limits with the same name.
    DuplicateLimitName(String),
    /// A trusted-proxy entry that is neither a CIDR nor an address.
    BadCidr(String),
    /// A prefix length of 0, or longer than the address.
    BadPrefix {
        /// `IPv4` or `IPv6`.
        family: &'static str,
        /// The rejected length.
        prefix: u32,
    },
    /// Prefix lengths that are not `v4/N`, `v6/N` or both, comma-separated
    /// (the text as given).
    BadPrefixList(String),
    /// An invalid header name.
    BadHeaderName(String),
    /// A proxy header setting that is neither `x-forwarded-for`,
    /// `forwarded`, `either` nor a valid header name.
    BadProxyHeader(String),
    /// A [`HeaderCost`](crate::strategy::HeaderCost) that would let a
    /// request through for free, or that cannot work (the text says why).
    BadHeaderCost(String),
    /// A [`FixedCost`](crate::strategy::FixedCost) of 0, which would admit
    /// every request for free (a peek is `FixedCost::PEEK`).
    ZeroCost,
    /// [`Mode::Shape`](crate::strategy::Mode::Shape) on a limit whose
    /// store decides with another algorithm than the leaky bucket, which
    /// never holds a request: the limit and the algorithm.
    ShapeWithoutQueue {
        /// The limit's name.
        limit: String,
        /// Its algorithm's name.
        algorithm: &'static str,
    },
}

impl fmt::Display for LayerBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLimits => f.write_str("a rate-limit layer needs at least one limit"),
            Self::TooManyLimits(n) => write!(f, "{n} limits on one layer (at most 64)"),
            Self::BadLimitName(n) => write!(
                f,
                "bad limit name {n:?}: a name is {}",
                ratelimit_core::plumbing::LIMIT_NAME_RULE
            ),
            Self::DuplicateLimitName(n) => write!(f, "two limits are named {n:?}"),
            Self::BadCidr(c) => write!(
                f,
                "bad trusted proxy {c:?}: expected a CIDR like 10.0.0.0/8 or an address"
            ),
            Self::BadPrefix { family, prefix } => {
                let max = if *family == "IPv4" { 32 } else { 128 };
                write!(f, "bad {family} prefix /{prefix}: expected 1 to {max}")
            }
            Self::BadPrefixList(s) => write!(
                f,
                "bad prefix lengths {s:?}: expected v4/N, v6/N or both, comma-separated \
                 (v4/24, v6/48)"
            ),
            Self::BadHeaderName(n) => write!(f, "bad header name {n:?}"),
            Self::BadProxyHeader(n) => write!(
                f,
                "bad proxy header {n:?}: expected x-forwarded-for, forwarded, either, \
                 or the name of a header holding one address (x-real-ip...)"
            ),
            Self::BadHeaderCost(why) => write!(f, "bad header cost {why}"),
            Self::ZeroCost => f.write_str(
                "a fixed cost of 0 admits every request for free: a peek is FixedCost::PEEK",
            ),
            Self::ShapeWithoutQueue { limit, algorithm } => write!(
                f,
                "mode shape on limit {limit:?}, whose algorithm is {algorithm}: only a \
                 leaky-bucket holds requests to shape them (use mode enforce, or a leaky bucket)"
            ),
        }
    }
}

impl std::error::Error for LayerBuildError {}
