//! The tonic service of `RateLimitService` (`RlsServer`): the generated server's routing, with ratelimitd's codec.

use crate::grpc::Rls;
use crate::rls_codec::RlsCodec;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codegen::{http, Body, BoxFuture, Service, StdError};
use tonic::server::{NamedService, UnaryService};

/// The service's name.
const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
/// Its one method's path.
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `RateLimitService` as a tonic service: `ShouldRateLimit` answered by
/// [`Rls`]; a request that is not a `RateLimitRequest` (a descriptor
/// value that is not UTF-8...) is `INVALID_ARGUMENT` naming the field.
///
/// ```
/// use ratelimit_server::{grpc::Rls, Config, State};
/// use std::sync::Arc;
///
/// let state = Arc::new(State::new(&Config::parse("", "inline", |_| None).unwrap()).unwrap());
/// let service = Rls::new(state).into_server();
/// let _router = tonic::transport::Server::builder().add_service(service);
/// ```
#[derive(Debug, Clone)]
pub struct RlsServer {
    rls: Arc<Rls>,
}

impl RlsServer {
    /// The service answered by `rls`.
    pub(crate) fn new(rls: Rls) -> Self {
        Self { rls: Arc::new(rls) }
    }
}

impl NamedService for RlsServer {
    const NAME: &'static str = SERVICE;
}

impl<B> Service<http::Request<B>> for RlsServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != SHOULD_RATE_LIMIT {
            return Box::pin(async { Ok(unimplemented()) });
        }
        let method = ShouldRateLimit(Arc::clone(&self.rls));
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(RlsCodec);
            Ok(grpc.unary(method, request).await)
        })
    }
}

/// `ShouldRateLimit`, as tonic's unary calls take it.
struct ShouldRateLimit(Arc<Rls>);

impl UnaryService<RateLimitRequest> for ShouldRateLimit {
    type Response = RateLimitResponse;
    type Future = BoxFuture<tonic::Response<RateLimitResponse>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<RateLimitRequest>) -> Self::Future {
        let rls = Arc::clone(&self.0);
        Box::pin(async move { rls.should_rate_limit(request).await })
    }
}

/// The answer to a method this service does not have.
fn unimplemented() -> http::Response<tonic::body::Body> {
    tonic::Status::unimplemented("no such method").into_http()
}
