//! Bandwidth pacing: request bodies (uploads) and response bodies
//! (downloads) yielded no faster than a rate per key, as nginx's
//! `limit_rate` and `limit_rate_after` do.
//!
//! A [`PaceLayer`] paces; it never refuses (but a request without a usable
//! key, as its key-error policy says). Each paced body is a
//! [`PacedBody`]: its data frames are cut into pieces of at most the
//! layer's piece size, and each piece is charged to the key's budget in
//! the layer's store, its cost its bytes, through the store's check. An
//! admitted piece is yielded at once; a denied one waits the decision's
//! `retry_after` (a `tokio::time::sleep`, so `tokio::time::pause` drives
//! it) and is charged again. The rate and the burst are the algorithm's:
//! `TokenBucket::new(64 << 10, 256 << 10, 1s)` (`token-bucket 65536
//! refill 262144/1s`) sends 256 KiB per second after a burst of 64 KiB;
//! `Gcra::new(262_144, 1s)` the same rate with a burst of a whole
//! second's bytes. A piece larger than the algorithm's capacity could
//! never be admitted: the body charges pieces of the capacity instead.
//!
//! - The key's budget is the store's, so a `ratelimit-redis`
//!   `RedisStore` shared by every instance of an app gives a fleet one
//!   budget per key, and several
//!   bodies of one key (two downloads at once) share it.
//! - [`after`](PaceBuilder::after) lets each body's first bytes through
//!   unpaced and uncharged.
//! - Cancel-safe: a dropped body (a client that disconnects) charges
//!   nothing more. Only pieces already yielded were charged (and, on a
//!   remote store, a piece whose check was in flight).
//! - A store that fails lets the piece through (fail open), logged and
//!   counted as every layer's store errors (`ratelimit_store_errors_total`,
//!   labelled with the layer's name); the next piece tries the store
//!   again.
//! - A key error is answered as [`KeyErrorPolicy`](crate::strategy::KeyErrorPolicy)
//!   says (default: the key error's 4xx), or let through unpaced.
//! - The `RateLimit` header fields are not sent: no request is refused.
//!
//! ```
//! use axum::{routing::get, Router};
//! use std::time::Duration;
//! use tower_ratelimit::pace::{PaceLayer, Paced};
//! use tower_ratelimit::{key::PeerIp, MemoryStore, TokenBucket};
//!
//! let bytes = TokenBucket::new(64 << 10, 256 << 10, Duration::from_secs(1)).unwrap();
//! let pace = PaceLayer::builder("download", MemoryStore::new(bytes), PeerIp::new(), 16 << 10)
//!     .paced(Paced::Responses)
//!     .after(64 << 10)
//!     .build()
//!     .unwrap();
//! let app: Router = Router::new()
//!     .route("/download", get(|| async { vec![0u8; 1 << 20] }))
//!     .layer(pace);
//! # let _ = app;
//! ```
//!
//! In a policy table, a `[[limit]]` with `pace = "response"` is a pace
//! layer (see `policy`, feature `table`).

mod body;
mod budget;
mod builder;
mod error;
mod future;
mod layer;
mod meter;
mod paced;
mod service;
mod shared;

pub use body::PacedBody;
pub use builder::PaceBuilder;
pub use error::{PaceBuildError, MAX_PIECE};
pub use future::PaceFuture;
pub use layer::PaceLayer;
pub use paced::Paced;
pub use service::PaceService;
