//! The axum example app of `tower-ratelimit`: one route per kind of limit.
//!
//! | route | limit |
//! |---|---|
//! | `POST /tickets` | 1 per 5 minutes per user (the bearer token), GCRA; no token: 401 |
//! | `POST /accounts` | 2 per day per client IP (sliding log) |
//! | `POST /login` | 5 failed attempts per hour per client IP; only failures (401) count |
//! | `GET /api/items` | with a key listed in [`Config::api_keys`] (`X-API-Key`): token bucket per key, 500 burst, 100/s; without: 10 per minute per client IP; an unknown key: 401, counted as anonymous |
//! | `GET /health` | none |
//!
//! [`app`] builds the router with in-memory stores; [`app_with`] takes any
//! [`Stores`]: [`MemoryStores`], or [`RedisStores`] to share the limits
//! among every copy of the app. [`run`] serves it the way [`server`]
//! hardens it for the open internet.

use axum::body::Bytes;
use axum::extract::Extension;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ratelimit_core::{
    AnyAlgorithm, Clock, Gcra, MemoryStore, SlidingLog, StableKey, Store, SystemClock, TokenBucket,
};
use serde_json::json;
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::key::{Bearer, ClientIp, KeyError, KeyExtractor, ProxyHeader};
use tower_ratelimit::policy::{KeyErrorPolicy, StatusIs};
use tower_ratelimit::{BuildError, RateLimitInfo, RateLimitLayer};

mod api_keys;
mod redis_stores;
#[path = "../../hyper/src/server.rs"]
pub mod server;
pub use api_keys::{ApiKeys, API_KEY_CHALLENGE};
pub use redis_stores::RedisStores;

/// The app's settings.
#[derive(Clone)]
pub struct Config {
    /// How client IPs are found: the trusted proxies (none by default) and
    /// the one header they write (`X-Forwarded-For` by default).
    pub client_ip: ClientIp,
    /// The limits' clock (tests use a `ManualClock`).
    pub clock: Arc<dyn Clock>,
    /// The valid API keys (`API_KEYS`; none by default).
    pub api_keys: ApiKeys,
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
            api_keys: ApiKeys::default(),
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

/// In-memory stores, each capped at `max_keys` keys (default
/// [`server::DEFAULT_MAX_KEYS`], a million; `RATELIMIT_MAX_KEYS`).
#[derive(Debug, Clone, Copy)]
pub struct MemoryStores {
    max_keys: usize,
}

impl Default for MemoryStores {
    fn default() -> Self {
        Self::new(server::DEFAULT_MAX_KEYS)
    }
}

impl MemoryStores {
    /// Stores of at most `max_keys` keys each (at least 1).
    pub fn new(max_keys: usize) -> Self {
        Self {
            max_keys: max_keys.max(1),
        }
    }

    /// The cap on each store's keys.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }
}

impl Stores for MemoryStores {
    type Store<K: StoreKey> = MemoryStore<AnyAlgorithm, K>;

    fn store<K: StoreKey>(&self, _name: &str, algorithm: AnyAlgorithm) -> Self::Store<K> {
        MemoryStore::<AnyAlgorithm, K>::builder(algorithm)
            .max_keys(Some(self.max_keys))
            .build()
    }
}

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// The app with in-memory limits.
pub fn app(config: &Config) -> Router {
    app_with(config, &MemoryStores::default())
}

/// Serves `app` on `listener` with [`server::serve`] until `shutdown`
/// completes, giving handlers the peer's address as
/// `ConnectInfo<SocketAddr>`.
pub async fn run(
    listener: tokio::net::TcpListener,
    app: Router,
    options: server::ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    use axum::extract::ConnectInfo;
    use tower::ServiceExt;
    let tagged = move |peer: SocketAddr| {
        app.clone().map_request(
            move |mut req: axum::extract::Request<server::RequestBody>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            },
        )
    };
    server::serve(listener, options, tagged, shutdown).await;
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

    // With a valid API key: a token bucket per key (500 burst, 100/s). A
    // malformed key is a 400; without a valid key this layer steps aside,
    // so unknown keys never get state of their own...
    let keys = config.api_keys.clone();
    let known_key = move |req: &Parts| keys.known(req);
    let per_key = RateLimitLayer::builder(known_key)
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
    // ...and this one limits the others: 10 per minute per IP, whether
    // anonymous or with an unknown key (answered 401 by the handler).
    let keys = config.api_keys.clone();
    let anonymous_ip = move |req: &Parts| {
        if keys.known(req).is_ok() {
            return Err(KeyError::missing("anonymous client"));
        }
        client_ip.extract(req)
    };
    let keys = config.api_keys.clone();
    let list_items = move |req: Parts| list_items(keys, req);
    let anonymous = RateLimitLayer::builder(anonymous_ip)
        .limit(
            "anonymous",
            stores.store("anonymous", Gcra::new(10, MINUTE).expect(fixed).into()),
        )
        .on_key_error(KeyErrorPolicy::AllowMissing)
        .shared_clock(clock())
        .build()
        .expect(fixed);

    // GET /reports: expensive (about 100 ms each), at most 4 at once,
    // fair-queued by client IP: 8 waiting per client, 64 in all, none longer
    // than 10 s; a client whose queue is full gets 429, anyone when the
    // whole queue is full gets 503.
    let reports = tower_ratelimit::fair::FairQueueLayer::builder(config.client_ip.clone())
        .name("reports")
        .concurrency(4)
        .max_per_key(8)
        .max_total(64)
        .max_wait(Duration::from_secs(10))
        .build()
        .expect(fixed);
    let report = || async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Json(json!({ "report": "ready" }))
    };

    Router::new()
        .route("/reports", get(report).layer(reports))
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
        unauthorized("wrong username or password", LOGIN_CHALLENGE)
    }
}

/// The `WWW-Authenticate` challenge sent with a failed login's 401. The
/// credentials go in the body, so the scheme is the app's own: one no
/// browser answers with a password dialog.
pub const LOGIN_CHALLENGE: &str = "Login realm=\"axum-example\"";

async fn list_items(keys: ApiKeys, req: Parts) -> Response {
    if keys.is_unknown(&req) {
        return unauthorized("unknown API key", API_KEY_CHALLENGE);
    }
    Json(json!({ "items": ["apple", "banana", "cherry"] })).into_response()
}

/// A 401 with its `WWW-Authenticate` challenge, which RFC 9110 (§15.5.2)
/// requires of every 401.
fn unauthorized(detail: &str, challenge: &'static str) -> Response {
    let mut res = problem(StatusCode::UNAUTHORIZED, detail);
    res.headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    res
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
