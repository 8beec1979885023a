//! ratelimitd's tests: the real server on free ports, called by real clients.

mod binary;
mod calendar;
mod envoy;
mod grpc;
mod harness;
mod http;
mod nginx;
mod python;
mod redis;
mod settle;
