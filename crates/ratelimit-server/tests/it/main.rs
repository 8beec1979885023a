//! ratelimitd's tests: the real server on free ports, called by real clients.

mod admin;
mod binary;
mod calendar;
mod envoy;
mod grpc;
mod harness;
mod http;
mod metrics;
mod nginx;
mod python;
mod ready;
mod redis;
mod reload;
mod settle;
