//! The axum example app of `tower-ratelimit`: one route per kind of limit.
//!
//! | route | limit |
//! |---|---|
//! | `POST /tickets` | 1 per 5 minutes per user (the bearer token), GCRA; no token: 401 |
//! | `POST /accounts` | 2 per day per client IP (sliding log) |
//! | `POST /login` | 5 failed attempts per hour per client IP; only failures (401) count |
//! | `GET /api/items` | with `X-API-Key`: token bucket per key, 500 burst, 100/s; without: 10 per minute per client IP |
//! | `GET /health` | none |
//!
//! [`app`] builds the router with in-memory stores; [`app_with`] takes any
//! [`Stores`]: [`MemoryStores`], or [`RedisStores`] to share the limits
//! among every copy of the app.

use axum::body::Bytes;
use axum::extract::Extension;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ratelimit_core::{
    AnyAlgorithm, Clock, Gcra, MemoryStore, SlidingLog, StableKey, Store, SystemClock, TokenBucket,
};
use serde_json::json;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::key::{ApiKey, Bearer, ClientIp, KeyError, KeyExtractor, ProxyHeader};
use tower_ratelimit::policy::{KeyErrorPolicy, StatusIs};
use tower_ratelimit::{BuildError, RateLimitInfo, RateLimitLayer};

mod redis_stores;
pub use redis_stores::RedisStores;

/// The app's settings.
#[derive(Clone)]
pub struct Config {
    /// How client IPs are found: the trusted proxies (none by default) and
    /// the one header they write (`X-Forwarded-For` by default).
    pub client_ip: ClientIp,
    /// The limits' clock (tests use a `ManualClock`).
    pub clock: Arc<dyn Clock>,
}

impl Config {
    /// Trusts the comma-separated CIDRs in `trusted_proxies`, reading the
    /// client's address from their `X-Forwarded-For`.
    pub fn new(trusted_proxies: &str) -> Result<Self, BuildError> {
        Self::behind(trusted_proxies, ProxyHeader::XForwardedFor)
    }

    /// Trusts the comma-separated CIDRs in `trusted_proxies`, reading the
    /// client's address from `header` only: the one those proxies write.
    pub fn behind(trusted_proxies: &str, header: ProxyHeader) -> Result<Self, BuildError> {
        Ok(Self {
            client_ip: ClientIp::from_list(trusted_proxies)?.header(header),
            ..Self::default()
        })
    }

    /// Reads `TRUSTED_PROXIES` (comma-separated CIDRs; unset: none) and
    /// `TRUSTED_PROXY_HEADER` (`x-forwarded-for`, the default; `forwarded`;
    /// `either`; or a single-address header like `x-real-ip`,
    /// `cf-connecting-ip`, `fly-client-ip`).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with the variables looked up by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let header = match var(TRUSTED_PROXY_HEADER) {
            Some(h) if !h.trim().is_empty() => h.parse().map_err(|error| ConfigError {
                var: TRUSTED_PROXY_HEADER,
                error,
            })?,
            _ => ProxyHeader::XForwardedFor,
        };
        let proxies = var(TRUSTED_PROXIES).unwrap_or_default();
        Self::behind(&proxies, header).map_err(|error| ConfigError {
            var: TRUSTED_PROXIES,
            error,
        })
    }
}

const TRUSTED_PROXIES: &str = "TRUSTED_PROXIES";
const TRUSTED_PROXY_HEADER: &str = "TRUSTED_PROXY_HEADER";

/// A bad setting in the environment: the variable and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable (`TRUSTED_PROXY_HEADER`).
    pub var: &'static str,
    /// What is wrong with its value.
    pub error: BuildError,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.var, self.error)
    }
}

impl std::error::Error for ConfigError {}

impl Default for Config {
    fn default() -> Self {
        Self {
            client_ip: ClientIp::trusting([]),
            clock: Arc::new(SystemClock::new()),
        }
    }
}

/// What a key must be for any store: hashable for memory (with a
/// [`StableKey`] for per-key window offsets), displayable for Redis.
pub trait StoreKey: Hash + Eq + StableKey + Clone + Display + Send + Sync + 'static {}
impl<K: Hash + Eq + StableKey + Clone + Display + Send + Sync + 'static> StoreKey for K {}

/// Makes one store per limit: in memory here, shared (Redis) elsewhere.
pub trait Stores {
    /// The store for keys `K`.
    type Store<K: StoreKey>: Store<K, CheckFuture: Unpin, RefundFuture: Unpin>;

    /// A store named `name` deciding with `algorithm`.
    fn store<K: StoreKey>(&self, name: &str, algorithm: AnyAlgorithm) -> Self::Store<K>;
}

/// In-memory stores, each capped at a million keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryStores;

impl Stores for MemoryStores {
    type Store<K: StoreKey> = MemoryStore<AnyAlgorithm, K>;

    fn store<K: StoreKey>(&self, _name: &str, algorithm: AnyAlgorithm) -> Self::Store<K> {
        MemoryStore::<AnyAlgorithm, K>::builder(algorithm)
            .max_keys(Some(1_000_000))
            .build()
    }
}

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// The app with in-memory limits.
pub fn app(config: &Config) -> Router {
    app_with(config, &MemoryStores)
}

/// The app with limits kept in `stores`.
pub fn app_with<S: Stores>(config: &Config, stores: &S) -> Router {
    let client_ip = config.client_ip.clone();
    let clock = || config.clock.clone();
    let fixed = "the example's limits are valid";

    // 1 ticket per 5 minutes per user; no bearer token: 401.
    let tickets = RateLimitLayer::builder(Bearer::new())
        .limit(
            "tickets",
            stores.store("tickets", Gcra::new(1, 5 * MINUTE).expect(fixed).into()),
        )
        .shared_clock(clock())
        .build()
        .expect(fixed);

    // 2 accounts per day per client IP.
    let accounts = RateLimitLayer::builder(client_ip.clone())
        .limit(
            "accounts",
            stores.store("accounts", SlidingLog::new(2, DAY).expect(fixed).into()),
        )
        .shared_clock(clock())
        .build()
        .expect(fixed);

    // 5 failed logins per hour per client IP: each attempt reserves a slot
    // before the password check, and gets it back unless it fails (401).
    let login = RateLimitLayer::builder(client_ip.clone())
        .limit(
            "login-failures",
            stores.store("login", SlidingLog::new(5, HOUR).expect(fixed).into()),
        )
        .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
        .shared_clock(clock())
        .build()
        .expect(fixed);

    // With an API key: a token bucket per key (500 burst, 100/s). A
    // malformed key is a 400; without a key this layer steps aside...
    let per_key = RateLimitLayer::builder(ApiKey::new())
        .limit(
            "api-key",
            stores.store(
                "api-key",
                TokenBucket::new(500, 100, Duration::from_secs(1))
                    .expect(fixed)
                    .into(),
            ),
        )
        .on_key_error(KeyErrorPolicy::AllowMissing)
        .shared_clock(clock())
        .build()
        .expect(fixed);
    // ...and this one limits anonymous clients: 10 per minute per IP.
    let anonymous_ip = move |req: &Parts| {
        if ApiKey::new().is_present(req) {
            return Err(KeyError::missing("anonymous client"));
        }
        client_ip.extract(req)
    };
    let anonymous = RateLimitLayer::builder(anonymous_ip)
        .limit(
            "anonymous",
            stores.store("anonymous", Gcra::new(10, MINUTE).expect(fixed).into()),
        )
        .on_key_error(KeyErrorPolicy::AllowMissing)
        .shared_clock(clock())
        .build()
        .expect(fixed);

    Router::new()
        .route("/tickets", post(create_ticket).route_layer(tickets))
        .route("/accounts", post(create_account).route_layer(accounts))
        .route("/login", post(login_handler).route_layer(login))
        .route(
            "/api/items",
            get(list_items).route_layer(anonymous).route_layer(per_key),
        )
        .route("/health", get(|| async { "ok" }))
}

async fn create_ticket(Extension(info): Extension<RateLimitInfo>) -> impl IntoResponse {
    let next = info.decisions().first().map(|d| d.decision.reset.as_secs());
    (
        StatusCode::CREATED,
        Json(json!({ "ticket": "created", "next_ticket_in_seconds": next })),
    )
}

async fn create_account(Extension(info): Extension<RateLimitInfo>) -> impl IntoResponse {
    (
        StatusCode::CREATED,
        Json(json!({ "account": "created", "remaining_today": info.remaining() })),
    )
}

#[derive(serde::Deserialize)]
struct Login {
    username: String,
    password: String,
}

/// Accepts any content type whose body is the JSON object.
async fn login_handler(body: Bytes) -> Response {
    let Ok(login) = serde_json::from_slice::<Login>(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "expected a JSON object {\"username\": ..., \"password\": ...}",
        );
    };
    if login.password == "open sesame" {
        Json(json!({ "user": login.username, "logged_in": true })).into_response()
    } else {
        problem(StatusCode::UNAUTHORIZED, "wrong username or password")
    }
}

async fn list_items() -> impl IntoResponse {
    Json(json!({ "items": ["apple", "banana", "cherry"] }))
}

fn problem(status: StatusCode, detail: &str) -> Response {
    let body = json!({
        "type": "about:blank",
        "title": status.canonical_reason(),
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}
