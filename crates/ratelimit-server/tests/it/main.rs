//! ratelimitd's tests: the real server on free ports, called by real clients.

mod grpc;
mod harness;
mod http;
