//! A deployment in one call (feature `redis`): one file says every limit
//! and where it runs, [`Limits`] applies it.
//!
//! The file is a policy table (see [`table`](crate::policy)) with four
//! more sections, each optional:
//!
//! ```toml
//! [store]                      # default: memory
//! kind = "redis"               # or "memory" (max-keys = N)
//! url = "redis://10.0.0.5:6379/"  # rediss://, redis+sentinel://, or a Cluster's nodes: ["redis://a:6379", ...]
//! tls-ca = "/etc/redis/ca.pem" # rediss:// with a private CA
//! fallback-max-keys = 100000   # decide in memory while Redis fails
//! lease = 10                   # local leases for hot keys (off by default)
//!
//! [proxies]
//! trusted = ["10.0.0.0/8"]     # whose header client-ip believes
//! header = "x-forwarded-for"   # or forwarded, x-real-ip...
//!
//! [admin]                      # off unless an address is set
//! address = "127.0.0.1:9200"
//! token-file = "/run/secrets/ratelimit-admin"  # or token-env = "VAR" (default ADMIN_TOKEN)
//!
//! [metrics]                    # off unless an address is set
//! address = "127.0.0.1:9100"
//!
//! [server]                     # where Limits::serve serves the app
//! addr = "0.0.0.0:3000"        # default 127.0.0.1:3000
//! max-connections = 10000      # default: below the open-file limit
//! max-connections-per-client = 100  # default 100 (behind trusted proxies: none of its own)
//!
//! [[plan]]                     # see the policy table's plans
//! name = "pro"
//! key = "api-key"
//! keys-env = "PRO_KEYS"        # read through the same environment as the overrides
//!
//! [[limit]]
//! name = "login"
//! algorithm = "sliding-log 5/1h"
//! key = "client-ip"
//! routes = ["POST /login"]
//! ban = "1h"
//! ```
//!
//! The token is never written in the file: `token = "..."` is refused,
//! naming the field. The variables of the README's settings table
//! ([`OVERRIDES`]: `TRUSTED_PROXIES`, `TRUSTED_PROXY_HEADER`, `REDIS_URL`,
//! `REDIS_TLS_CA`, `RATELIMIT_MAX_KEYS`, `RATELIMIT_LEASE`, `ADMIN_ADDR`,
//! `ADMIN_TOKEN`, `METRICS_ADDR`, `RATELIMIT_CONFIG`, `BIND_ADDR`,
//! `MAX_CONNECTIONS`, `MAX_CONNECTIONS_PER_CLIENT`) override the file, and a bad value is refused naming
//! the variable. Unknown fields are refused, naming the file and line.
//! Each limit runs on the store with its ban; in Redis, the key secret
//! and the admin API's run-time entries (list entries, overrides, keys
//! moved between plans) are shared by every instance through Redis. A
//! plan with `shared = true` needs the store in Redis.
//!
//! ```no_run
//! use axum::{routing::post, Router};
//! use tower_ratelimit::deploy::Limits;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let limits = Limits::load("ratelimit.toml").await?;
//! let app = limits.apply(Router::new().route("/login", post(|| async { "ok" })))?;
//! if let (Some(addr), Some(admin)) = (limits.admin_addr(), limits.admin_router()) {
//!     let listener = tokio::net::TcpListener::bind(addr).await?;
//!     let admin = admin.into_make_service_with_connect_info::<std::net::SocketAddr>();
//!     tokio::spawn(async move { axum::serve(listener, admin).await });
//! }
//! assert!(limits.ready().await);
//! # let _ = app;
//! # Ok(())
//! # }
//! ```

mod admin;
mod admin_auth;
mod admin_entries;
mod admin_plans;
mod admin_problem;
mod admin_state;
mod admin_token;
mod env;
mod error;
mod inner;
mod limits;
#[cfg(feature = "prometheus")]
mod metrics;
mod ready;
mod sections;
mod server;
mod server_settings;
mod settings;
mod startup_log;
mod store_status;
mod watch;

pub use admin_auth::{AdminGate, AdminRefusal, WRONG_TOKENS_ALL_SOURCES, WRONG_TOKENS_PER_SOURCE};
pub use admin_token::{AdminToken, MIN_TOKEN};
pub use env::OVERRIDES;
pub use error::DeployError;
pub use limits::Limits;
pub use server::{Server, SIDE_CONNECTIONS};
pub use server_settings::DEFAULT_ADDR;
pub use settings::{AdminSettings, Deployment};
pub use store_status::StoreStatus;
