//! Rate-limiting middleware for tower and axum: exact algorithms, safe
//! client keys behind proxies, IETF `RateLimit` headers.
//!
//! [`RateLimitLayer`] limits any `http::Request<B>` → `http::Response<B2>`
//! service: in an axum 0.8 `Router` with `.layer` or `.route_layer`, in a
//! `tower::ServiceBuilder`, or under plain hyper. The algorithm (from
//! [`ratelimit_core`]) decides, the store owns atomicity, the
//! [`KeyExtractor`](key::KeyExtractor) says who is limited, and the
//! [`ResponseBuilder`](response::ResponseBuilder) says what a rejected
//! client gets. The algorithms, stores, clocks and errors of
//! `ratelimit-core` are re-exported here, each once ([`Gcra`],
//! [`MemoryStore`], [`AnyAlgorithm`], ...). Their options (a fixed
//! window's anchor, a memory store's builder) are in `ratelimit-core`'s
//! modules. What each algorithm decides, to the last boundary, is in
//! [`docs/ALGORITHMS.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md).
//!
//! ```
//! use axum::{routing::get, Router};
//! use std::time::Duration;
//! use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};
//!
//! // 100 requests per minute per client IP (IPv6 per /64).
//! let store = MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap());
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(store, PeerIp::new()));
//! // Serve with app.into_make_service_with_connect_info::<SocketAddr>().
//! ```
//!
//! # Where to put it
//!
//! `Router::layer` and `route_layer` limit routes (and let each route have
//! its own policy); axum then wraps every layered route once more, which
//! costs about as much as the check itself. A limit for the whole app can
//! instead wrap the `Router`, checking before routing: a rejected request
//! then costs less than serving the page (see
//! [BENCHMARKS.md](https://github.com/ratelimit-rs/ratelimit/blob/main/BENCHMARKS.md)). Keys by
//! route ([`Route`](key::Route)) need axum's matched path, which only
//! exists inside the router (outside it they see the raw path, one key per
//! URL), so they go in with `Router::layer`.
//!
//! ```
//! # use axum::{routing::get, Router};
//! # use std::{net::SocketAddr, time::Duration};
//! # use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};
//! use axum::{extract::Request, ServiceExt};
//! use tower_layer::Layer;
//!
//! let store = MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap());
//! let router = Router::new().route("/", get(|| async { "hello" }));
//! let app = RateLimitLayer::new(store, PeerIp::new()).layer(router);
//! let make_service =
//!     ServiceExt::<Request>::into_make_service_with_connect_info::<SocketAddr>(app);
//! // axum::serve(listener, make_service)
//! # let _ = make_service;
//! ```
//!
//! # What a limited client sees
//!
//! `429 Too Many Requests` with `Retry-After` in whole seconds (rounded up,
//! never 0 for a positive wait), the IETF draft's `RateLimit-Policy:
//! "default";q=100;w=60` and `RateLimit: "default";r=0;t=1`, and an
//! RFC 9457 `application/problem+json` body (see
//! [`ProblemJson`](response::ProblemJson)). Admitted responses carry the
//! two `RateLimit` fields too ([`Headers`](response::Headers) switches them
//! off or adds legacy `X-RateLimit-*`), and handlers read every decision
//! from the request extensions as a [`RateLimitInfo`]. How each field is
//! derived from a decision:
//! [HTTP fields](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md#http-fields).
//!
//! # gRPC (tonic)
//!
//! With the `grpc` feature the same layer limits a tonic server
//! (`Server::builder().layer(..)`, or a tower layer around its routes):
//! `response::Grpc` answers a limited call with the gRPC status
//! `RESOURCE_EXHAUSTED` (HTTP 200, trailers only) whose details carry a
//! `google.rpc.RetryInfo`, and [`PeerIp`](key::PeerIp) and
//! [`ClientIp`](key::ClientIp) read the peer address from tonic's
//! `TcpConnectInfo`. gRPC metadata are HTTP headers, so the header, API
//! key and bearer extractors read them as they are; a limit per method
//! selects on the path (`/package.Service/Method`) with
//! [`select`](RateLimitBuilder::select). The feature needs Rust 1.88
//! (tonic 0.14's).
//!
//! # Keys
//!
//! [`key`] has the peer IP, the client IP behind trusted proxies
//! (`X-Forwarded-For` or `Forwarded` read from the right, or a single
//! address header like `X-Real-IP`; headers from untrusted peers ignored;
//! IPv4 by address and IPv6 by /64, or by any prefix: see
//! [`IpPrefixes`](key::IpPrefixes) to limit a client's network too), a
//! header, an API key, a bearer token, a user id from the
//! extensions, a global key and composite keys. Keys own at most about a
//! hundred bytes each, never the request's buffers.
//! A request without a usable key gets a 4xx, or goes through unlimited,
//! as [`KeyErrorPolicy`](strategy::KeyErrorPolicy) says: never a 5xx.
//!
//! # Policies
//!
//! [`RateLimitLayer::builder`] adds several named limits (admitted only if
//! all admit; nothing consumed otherwise), per-request costs and limit
//! selection (plan tiers), counting only some responses (failed logins:
//! reserve, then refund), shaping for the leaky bucket, dry-run, and the
//! store failure policy (fail open by default, or 503). See [`strategy`];
//! the policy table (`policy`, feature `table`) keeps every limit of an
//! app in one file.
//! Every strategy (key, cost, selector, counted responses, rejection)
//! is a trait that closures implement, with one builder method each
//! ([`cost`](RateLimitBuilder::cost), [`select`](RateLimitBuilder::select),
//! [`count_if`](RateLimitBuilder::count_if),
//! [`response`](RateLimitBuilder::response)); a closure names its
//! arguments' types.
//!
//! ```
//! use http::request::Parts;
//! use tower_ratelimit::key::{HeaderKey, KeyError};
//! use tower_ratelimit::strategy::Selection;
//! use tower_ratelimit::{Gcra, MemoryStore, RateLimitLayer};
//! # use std::time::Duration;
//! # let store = |n| MemoryStore::new(Gcra::new(n, Duration::from_secs(60)).unwrap());
//!
//! let layer = RateLimitLayer::builder(|req: &Parts| {
//!     req.headers
//!         .get("x-tenant")
//!         .map(|v| HeaderKey::new(v.as_bytes()))
//!         .ok_or(KeyError::missing("X-Tenant header"))
//! })
//! .limit("tenant", store(1000))
//! .cost(|req: &Parts| if req.uri.path().starts_with("/bulk") { 10 } else { 1 })
//! .select(|_req: &Parts, tenant: &HeaderKey| match tenant.stored() {
//!     "internal" => Selection::NONE,
//!     _ => Selection::ALL,
//! })
//! .count_if(|res: &http::response::Parts| !res.status.is_server_error())
//! .build()
//! .unwrap();
//! # let _ = layer;
//! ```
//!
//! With several limits, the layer checks them in order and refunds those
//! already consumed when a later one denies. With a store whose futures
//! are ready at once (`MemoryStore`) this runs under a per-key lock, so
//! it is exact with respect to every other request through the same layer.
//! With a remote store the checks are separate round trips: between a
//! consumption and its refund, a concurrent request may see the limit one
//! request fuller than it ends up. (A request dropped by its client in the middle of
//! those round trips keeps what it already consumed.) All limits of one
//! layer share a store type: mix algorithms with
//! `MemoryStore<AnyAlgorithm, K>`, or stack layers (each then decides on its
//! own, unless the outer one has
//! [`refund_on_inner_limit`](RateLimitBuilder::refund_on_inner_limit)).
//!
//! # Observability
//!
//! `tracing` events: `debug` when a request is limited (or would be, in
//! dry-run) or has no key, `warn` when the store fails, and `error`, once
//! per layer, when requests carry no peer address (the app is served
//! without `into_make_service_with_connect_info::<SocketAddr>()`). With the `metrics`
//! feature, counters through the `metrics` facade, labelled by `limit`:
//! `ratelimit_allowed_total`, `ratelimit_limited_total`,
//! `ratelimit_dry_run_total`, `ratelimit_store_errors_total`, and
//! `ratelimit_key_errors_total` (labelled by `reason`).
//!
//! # Stores
//!
//! Any [`ratelimit_core::Store`] whose futures are `Unpin` (box them) works:
//! the in-memory store, whose ready futures make the hot path free of
//! allocation and await points, or a remote one (Redis) whose checks may
//! fail with [`StoreError`]; failures go
//! through the [`FailurePolicy`](strategy::FailurePolicy). Keys of built-in
//! extractors implement `Display` for remote stores.
//!
//! # How this differs from `tower::limit::RateLimit`
//!
//! `tower::limit::RateLimit` is a different tool: one fixed-window budget
//! for a whole service, enforced as backpressure in `poll_ready`. It is not
//! `Clone`, so axum needs it behind a `Buffer` (and a `HandleErrorLayer`);
//! every clone of the buffered service then feeds the same queue rather
//! than sharing a limit, and requests wait instead of being refused. It has
//! no notion of clients, keys, headers or 429s.
//!
//! This layer is `Clone + Send + Sync` (clones share the stores), decides
//! per key in `call`, answers a limited request at once with a 429 (never
//! an error, so no `HandleErrorLayer` and no `Buffer`), and never blocks
//! `poll_ready`.

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(feature = "table")]
mod access_list;
mod builder;
mod check;
mod clock;
mod cost_from;
mod cost_report;
mod decide;
mod decimal;
mod error;
mod future;
mod info;
mod layer;
#[cfg(feature = "table")]
mod limit_handle;
mod metered_body;
#[cfg(feature = "table")]
mod net_set;
mod observe;
#[cfg(feature = "table")]
mod override_key;
mod render;
mod reserve;
mod reserved;
mod service;
mod settle;
mod shared;
mod stable_key;
mod summary;
mod upkeep;

#[cfg(feature = "redis")]
pub mod deploy;
pub mod fair;
pub mod key;
pub mod pace;
#[cfg(feature = "table")]
pub mod policy;
pub mod response;
#[cfg(feature = "serve")]
pub mod serve;
pub mod strategy;

pub use builder::RateLimitBuilder;
pub use cost_from::CostFrom;
pub use cost_report::{ActualCost, CostReport};
pub use error::LayerBuildError;
pub use future::ResponseFuture;
pub use info::{LimitDecision, Limited, RateLimitInfo};
pub use layer::RateLimitLayer;
pub use metered_body::MeteredBody;
pub use service::RateLimit;

// What an app names from `ratelimit-core`, each once: the algorithms,
// stores, clocks, decisions and errors. The rest of ratelimit-core (the
// algorithms' options and states, the stores' options) is reached through
// a dependency on it.
#[doc(no_inline)]
pub use ratelimit_core::{
    Algorithm, AnyAlgorithm, BanPolicy, BoxStore, Clock, ConfigError, Decision, FixedWindow, Gcra,
    LeakyBucket, ManualClock, MemoryStore, SlidingLog, SlidingWindow, Store, StoreError,
    SystemClock, TokenBucket,
};
