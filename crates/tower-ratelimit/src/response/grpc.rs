//! gRPC rejections for tonic servers: `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo` (feature `grpc`).

use super::problem::key_error_detail;
use super::{Rejection, ResponseBuilder};
use http::header::{HeaderValue, WWW_AUTHENTICATE};
use http::{Response, StatusCode};
use ratelimit_core::plumbing::ceil_secs;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// A [`ResponseBuilder`] for gRPC services (tonic's `Server::builder().layer(..)`,
/// or a layer around its routes): every rejection is a gRPC status in a
/// trailers-only response (HTTP 200, `content-type: application/grpc`, an
/// empty body), for any body type with a `Default` (tonic's `Body`).
///
/// ```
/// use http::StatusCode;
/// use std::time::Duration;
/// use tower_ratelimit::key::{KeyError, PeerIp};
/// use tower_ratelimit::response::{Grpc, Rejection};
/// use tower_ratelimit::{Gcra, MemoryStore, RateLimitLayer};
///
/// // 5 calls per minute per peer IP, answered as gRPC statuses.
/// let layer = RateLimitLayer::builder(PeerIp::new())
///     .limit("calls", MemoryStore::new(Gcra::new(5, Duration::from_secs(60)).unwrap()))
///     .response(Grpc::new())
///     .build()
///     .unwrap();
/// // tonic::transport::Server::builder().layer(layer).add_service(..)
/// # let _ = layer;
/// let no_token = KeyError::missing("authorization").with_status(StatusCode::UNAUTHORIZED);
/// let status = Grpc::new().status(Rejection::KeyError(&no_token));
/// assert_eq!(status.code(), tonic::Code::Unauthenticated);
/// ```
///
/// - Limited: `grpc-status: 8` (`RESOURCE_EXHAUSTED`), `grpc-message`
///   `Rate limit "name" exceeded: retry in N seconds.` (percent-encoded
///   as gRPC requires), and `grpc-status-details-bin` (base64, without
///   padding) holding a `google.rpc.Status` with one
///   `google.rpc.RetryInfo` detail whose `retry_delay` is the exact wait.
///   The layer adds `retry-after` and the IETF `ratelimit-policy` and
///   `ratelimit` fields beside them, which gRPC clients read as trailing
///   metadata. A request whose cost exceeds the limit's capacity gets
///   `RESOURCE_EXHAUSTED` without `RetryInfo` (retrying cannot help).
/// - Banned (the limit's ban): `RESOURCE_EXHAUSTED`, the message
///   `Banned by rate limit "name": retry in N seconds.`, `RetryInfo` with
///   the ban's remaining time, and a `google.rpc.ErrorInfo` detail with
///   reason `BANNED`, domain `tower-ratelimit` and the limit's name.
/// - Key error: `UNAUTHENTICATED` for a 401 (with `www-authenticate` when
///   the error has a challenge), `PERMISSION_DENIED` for a 403,
///   `INVALID_ARGUMENT` otherwise, with a message naming what was missing
///   or malformed.
/// - Store unavailable (fail closed): `UNAVAILABLE`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grpc {
    _priv: (),
}

impl Grpc {
    /// The builder.
    pub const fn new() -> Self {
        Self { _priv: () }
    }

    /// The gRPC status for `rejection`.
    pub fn status(&self, rejection: Rejection<'_>) -> Status {
        match rejection {
            Rejection::Limited(info) => match info.denied() {
                Some(denied) => match denied.decision.retry_after() {
                    Some(wait) => limited(denied.name, wait, denied.decision.banned),
                    None => Status::resource_exhausted(format!(
                        "This request costs more than rate limit \"{}\" allows ({} per window): \
                         it can never be admitted.",
                        denied.name, denied.decision.limit
                    )),
                },
                None => Status::resource_exhausted("Rate limit exceeded."),
            },
            Rejection::KeyError(e) => {
                let code = match e.status() {
                    StatusCode::UNAUTHORIZED => Code::Unauthenticated,
                    StatusCode::FORBIDDEN => Code::PermissionDenied,
                    _ => Code::InvalidArgument,
                };
                Status::new(code, key_error_detail(e))
            }
            Rejection::Unavailable(_) => {
                Status::unavailable("The rate limiter is unavailable; try again later.")
            }
        }
    }
}

/// `RESOURCE_EXHAUSTED` with the exact wait; a ban says so in its message
/// and in a `google.rpc.ErrorInfo` detail (reason `BANNED`).
fn limited(name: &str, wait: std::time::Duration, banned: bool) -> Status {
    let secs = ceil_secs(wait).max(1);
    let unit = if secs == 1 { "second" } else { "seconds" };
    let mut details = ErrorDetails::with_retry_info(Some(wait));
    let message = if banned {
        let metadata = [("limit".to_owned(), name.to_owned())];
        details.set_error_info(
            "BANNED",
            "tower-ratelimit",
            std::collections::HashMap::from(metadata),
        );
        format!("Banned by rate limit \"{name}\": retry in {secs} {unit}.")
    } else {
        format!("Rate limit \"{name}\" exceeded: retry in {secs} {unit}.")
    };
    Status::with_error_details(Code::ResourceExhausted, message, details)
}

impl<B: Default> ResponseBuilder<B> for Grpc {
    fn build(&self, rejection: Rejection<'_>) -> Response<B> {
        let mut res = self.status(rejection).into_http();
        if let Rejection::KeyError(e) = rejection {
            if let Some(c) = e.challenge() {
                res.headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static(c));
            }
        }
        res
    }
}
