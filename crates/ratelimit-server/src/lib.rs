//! `ratelimitd`: the limiter as a service.
//!
//! It answers Envoy's rate limit protocol
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, gRPC)
//! and an HTTP check (`POST /check` with JSON, `GET /check?limit=NAME` for
//! nginx `auth_request` and Traefik `forwardAuth`, `POST /settle` for costs
//! known after the response), from limits in a TOML
//! file, each on one of `ratelimit-core`'s algorithms, in memory or on
//! Redis. Operations: a reload that keeps what each key has used
//! ([`State::reload`], SIGHUP), Prometheus metrics ([`metrics`]),
//! readiness that asks the stores, and an admin API ([`admin`]).
//! The guide is `docs/ratelimitd.md`.
//!
//! ```
//! use ratelimit_server::{check_all, Config, Hit, State};
//!
//! let config = Config::parse(r#"
//!     [[limit]]
//!     name = "per-ip"
//!     domain = "edge"
//!     algorithm = "fixed-window 2/1m"
//!     descriptors = [{ key = "remote_address" }]
//! "#, "inline", |_| None).unwrap();
//! let state = State::new(&config).unwrap();
//! let hit = Hit::resolve(&state.limits(), "edge", &[("remote_address", "10.0.0.1")], 1, "none").unwrap();
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let admitted = |o: ratelimit_server::Outcome| !o.over;
//! assert!(admitted(check_all(&[hit.clone()], state.now()).await.unwrap()));
//! assert!(admitted(check_all(&[hit.clone()], state.now()).await.unwrap()));
//! assert!(!admitted(check_all(&[hit], state.now()).await.unwrap()));
//! # });
//! ```

pub mod admin;
mod admin_plans;
mod check;
mod config;
mod config_error;
mod env;
mod forward_key;
pub mod grpc;
mod headers;
pub mod http_api;
mod http_json;
mod key_ops;
mod limit_config;
mod limits;
pub mod metrics;
mod reload;
mod request_bounds;
mod rls_codec;
mod rls_server;
mod rule;
mod server;
mod settle;
mod state;
pub mod unit;
mod unmatched;

pub use check::{check_all, Hit, KeyTooLong, Outcome, Status, MAX_KEY_BYTES};
pub use config::{Config, ServerSettings, DEFAULT_GRPC, DEFAULT_HTTP, DEFAULT_MAX_KEYS};
pub use config_error::ConfigFileError;
pub use env::SERVER_OVERRIDES;
pub use headers::fields;
pub use key_ops::{KeyOpError, KeyState};
pub use limit_config::{EntryPattern, LimitConfig};
pub use limits::Limits;
pub use reload::{Reloaded, RuleChange};
pub use request_bounds::{MAX_DESCRIPTORS, MAX_ENTRIES};
pub use rls_server::RlsServer;
pub use rule::{Entry, Rule};
pub use server::{Running, DRAIN_TIMEOUT};
pub use state::State;
