//! Integration tests of tower-ratelimit: one binary, one module per topic.

mod common;

mod basics;
mod closures;
mod concurrency;
mod count_only;
// A deployment from one file on a real redis-server (`deploy::Limits`).
#[cfg(all(feature = "redis", feature = "prometheus"))]
mod deploy;
// `deploy::Limits` loaded from files on disk: errors name the file at fault.
#[cfg(feature = "redis")]
mod deploy_files;
mod dry_run;
mod failure;
mod fair;
#[cfg(feature = "grpc")]
mod grpc;
mod headers;
mod long_keys;
mod malformed;
#[cfg(feature = "metrics")]
mod metrics;
mod multi;
mod pace;
mod prefixes;
mod settle;
mod shaping;
mod spoofing;
#[cfg(feature = "table")]
mod table;
#[cfg(feature = "table")]
mod table_ban;
#[cfg(feature = "table")]
mod table_handle;
#[cfg(feature = "table")]
mod table_lists;
#[cfg(feature = "table")]
mod table_pace;
#[cfg(feature = "table")]
mod table_plans;
#[cfg(feature = "table")]
mod table_prefixes;
#[cfg(feature = "table")]
mod table_reset;
#[cfg(feature = "table")]
mod table_settle;
#[cfg(feature = "table")]
mod table_settle_bound;
#[cfg(feature = "table")]
mod table_shared;
mod upkeep;
