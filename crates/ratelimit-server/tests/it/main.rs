//! ratelimitd's tests: the real server on free ports, called by real clients.

mod admin;
mod ban;
mod binary;
mod calendar;
mod connections;
mod envoy;
mod fleet;
mod grpc;
mod harness;
mod http;
mod metrics;
mod nginx;
mod plans;
mod proxies;
mod python;
mod ready;
mod redis;
mod reload;
mod settle;
