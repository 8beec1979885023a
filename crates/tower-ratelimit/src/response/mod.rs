//! Responses: the rejection builder trait, the default problem+json 429, gRPC statuses, and the rate-limit header fields.

mod builder;
#[cfg(feature = "grpc")]
mod grpc;
mod headers;
mod memo;
mod problem;

pub use builder::{Rejection, ResponseBuilder};
#[cfg(feature = "grpc")]
pub use grpc::Grpc;
pub(crate) use headers::{Fields, Rendered};
pub use headers::{
    Headers, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    X_RATELIMIT_RESET,
};
pub use problem::{ProblemJson, PROBLEM_JSON};
