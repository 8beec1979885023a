//! [`CostFrom`]: where a limit reads a request's actual cost after the response (a header, an extension, the body, trailers).

use http::HeaderName;
use std::fmt;
use std::str::FromStr;

/// Where a limit finds the actual cost of a request once the handler has
/// run, to settle the estimate it reserved at admission
/// ([`RateLimitBuilder::settle`](crate::RateLimitBuilder::settle)).
///
/// ```
/// use tower_ratelimit::CostFrom;
///
/// let from: CostFrom = "response-header:x-tokens-used".parse().unwrap();
/// assert_eq!(from.to_string(), "response-header:x-tokens-used");
/// assert!("response-header:".parse::<CostFrom>().is_err());
/// ```
///
/// | text | actual cost | when it settles |
/// |---|---|---|
/// | `response-header:NAME` | the decimal (ASCII digits) in response header `NAME` | with the response head |
/// | `extension` | the [`ActualCost`](crate::ActualCost) response extension | with the response head |
/// | `reported` | the sum the app adds to the request's [`CostReport`](crate::CostReport) | when the last clone of the report is gone |
/// | `body-bytes` | the response body's bytes, counted by [`MeteredBody`](crate::MeteredBody) | when the body ends or is dropped |
/// | `trailer:NAME` | the decimal in trailer `NAME`, read by [`MeteredBody`](crate::MeteredBody) | when the body ends or is dropped |
///
/// Every settled request carries a [`CostReport`](crate::CostReport) in
/// its extensions. A request settles to the larger of the value read
/// (a header, an extension, a trailer) and what was added to its report,
/// when the last clone of the report is dropped: a value of 0 does not
/// erase what the handler reported (a streamed response reports as it
/// goes: the header cannot say what is not yet produced). A value that is
/// not a decimal (`abc`, `-5`, `+5`, empty) counts as the reservation: the
/// request settles to the larger of the reservation and what was added,
/// and it is logged (`warn`, throttled) and counted
/// (`ratelimit_malformed_costs_total`). A number past `u64` is read as
/// `u64::MAX`. Whatever the kind: a response or body dropped before its
/// end (a client that disconnects) settles what was counted up to then,
/// and a request for which nothing was ever counted (no value, nothing
/// added to its report) keeps the estimate: nothing is refunded or added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CostFrom {
    /// A decimal in this response header (`response-header:x-tokens-used`).
    ResponseHeader(HeaderName),
    /// The handler's [`ActualCost`](crate::ActualCost) response extension.
    Extension,
    /// The sum reported through the request's [`CostReport`](crate::CostReport).
    Reported,
    /// The response body's bytes (through [`MeteredBody`](crate::MeteredBody)).
    BodyBytes,
    /// A decimal in this trailer of the response body (through
    /// [`MeteredBody`](crate::MeteredBody)).
    Trailer(HeaderName),
}

impl CostFrom {
    /// Whether the cost is counted as the body streams (through the
    /// request's [`CostReport`](crate::CostReport)), not read from the
    /// response head.
    pub fn from_body(&self) -> bool {
        matches!(self, Self::Reported | Self::BodyBytes | Self::Trailer(_))
    }
}

const EXPECTED: &str =
    "expected response-header:NAME, extension, reported, body-bytes or trailer:NAME";

fn header_name(kind: &str, name: &str) -> Result<HeaderName, String> {
    HeaderName::from_str(name)
        .map_err(|_| format!("bad cost-from {kind}:{name:?}: not a header name"))
}

impl FromStr for CostFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("response-header", name)) => {
                header_name("response-header", name).map(Self::ResponseHeader)
            }
            Some(("trailer", name)) => header_name("trailer", name).map(Self::Trailer),
            None if s == "extension" => Ok(Self::Extension),
            None if s == "reported" => Ok(Self::Reported),
            None if s == "body-bytes" => Ok(Self::BodyBytes),
            _ => Err(format!("bad cost-from {s:?}: {EXPECTED}")),
        }
    }
}

impl fmt::Display for CostFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ResponseHeader(name) => write!(f, "response-header:{name}"),
            Self::Extension => f.write_str("extension"),
            Self::Reported => f.write_str("reported"),
            Self::BodyBytes => f.write_str("body-bytes"),
            Self::Trailer(name) => write!(f, "trailer:{name}"),
        }
    }
}
