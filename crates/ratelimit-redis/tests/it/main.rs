//! Integration tests of ratelimit-redis against real redis-server
//! processes, one per test, each on its own free port.

mod harness;

mod any_store;
mod ban;
mod busy_host;
#[cfg(feature = "cluster")]
mod cluster;
mod concurrency;
mod data_loss;
mod deny_cache;
mod entries;
mod errors;
mod exact;
mod failure;
mod held_ban;
mod history;
mod history_faults;
mod invalidation;
mod lease;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "live")]
mod live_fallback;
#[cfg(feature = "live")]
mod live_reload;
mod multi;
mod outage_share;
mod reset;
mod secret;
#[cfg(feature = "sentinel")]
mod sentinel;
mod settle;
mod slow;
mod target;
#[cfg(feature = "tls")]
mod tls;
#[cfg(any(feature = "sentinel", feature = "cluster"))]
mod topology;
