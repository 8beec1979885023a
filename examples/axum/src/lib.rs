//! The axum example app of `tower-ratelimit`: one route per kind of limit.
//!
//! | route | limit |
//! |---|---|
//! | `POST /tickets` | 1 per 5 minutes per user (the bearer token), GCRA; no token: 401 |
//! | `POST /accounts` | 2 per day per client IP (an IPv4 address, an IPv6 /64) and 20 per day per network (an IPv4 /24, an IPv6 /48), sliding logs; only created accounts (201) count |
//! | `POST /login` | 5 failed attempts per hour per client IP and 100 per network; only failures (401) count; a success (200) resets the client's failures |
//! | `GET /api/items` | with a key listed in [`Config::api_keys`] (`X-API-Key`): token bucket per key, 500 burst, 100/s; without: 10 per minute per client IP; an unknown key: 401, counted as anonymous |
//! | `POST /v1/chat` | with a key listed in [`Config::api_keys`] (`X-API-Key`; else 401): 60 per minute and 100,000 tokens per day per key; the tokens, known after the handler runs, settle from `x-tokens-used` or, streamed, per event (a reservation of `x-max-tokens`, at most 40,000, and 40,000 without a positive decimal there; the handler delivers no more) |
//! | `GET /download` | 1 MiB, paced (never refused) at 256 KiB/s per client IP after a 64 KiB burst: about 3.75 s per download, each client with its own budget |
//! | `GET /health` | none |
//! | `GET /ready` | none: JSON with each limit's store state (`redis`, `fallback`, `memory`, `down`) and the instances sharing it (`instances`, counted through Redis: the fallback admits `1/instances` of each limit); 503 when one cannot decide |
//!
//! The limits live in one policy file, `examples/axum/ratelimit.toml`
//! ([`POLICY_FILE`]; the binary reads `$RATELIMIT_CONFIG` instead when set,
//! and reloads it on SIGHUP and on change). [`app`] builds the router with
//! the shipped policy in memory; [`app_with`] takes any [`Stores`]:
//! [`MemoryStores`], or [`RedisStores`] to share the limits among every
//! copy of the app; [`app_with_policy`] takes another policy too, and
//! returns the handle that reloads it. [`run`] serves it the way [`server`]
//! hardens it for the open internet.

use axum::body::Bytes;
use axum::extract::Extension;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ratelimit_core::{BanPolicy, Clock, LiveAlgorithm, MemoryStore, Store, SystemClock};
use ratelimit_redis::StoreState;
use serde_json::json;
use server::EnvError;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::key::{ClientIp, KeyError, KeyExtractor, ProxyHeader};
use tower_ratelimit::policy::{
    AppKey, PolicyError, PolicyHandle, PolicyKey, PolicyOptions, PolicyTable,
};
use tower_ratelimit::{LayerBuildError, RateLimitInfo};

pub mod admin;
pub mod admin_auth;
mod api_keys;
mod chat;
mod download;
mod redis_stores;
pub mod served_routes;
pub use api_keys::{ApiKeys, API_KEY_CHALLENGE};
pub use chat::{EVENT_GAP, MAX_TOKENS_PER_CALL, TOKENS_PER_EVENT};
pub use download::DOWNLOAD_BYTES;
pub use redis_stores::RedisStores;
pub use tower_ratelimit::serve as server;

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
    pub fn new(trusted_proxies: &str) -> Result<Self, LayerBuildError> {
        Self::behind(trusted_proxies, ProxyHeader::XForwardedFor)
    }

    /// Trusts the comma-separated CIDRs in `trusted_proxies`, reading the
    /// client's address from `header` only: the one those proxies write.
    pub fn behind(trusted_proxies: &str, header: ProxyHeader) -> Result<Self, LayerBuildError> {
        Ok(Self {
            client_ip: ClientIp::from_list(trusted_proxies)?.header(header),
            ..Self::default()
        })
    }

    /// Reads `TRUSTED_PROXIES` (comma-separated CIDRs; unset: none) and
    /// `TRUSTED_PROXY_HEADER` (`x-forwarded-for`, the default; `forwarded`;
    /// `either`; or a single-address header like `x-real-ip`,
    /// `cf-connecting-ip`, `fly-client-ip`).
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with the variables looked up by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let header = match var(TRUSTED_PROXY_HEADER) {
            // The refusal quotes the value: not repeated.
            Some(h) if !h.trim().is_empty() => h
                .parse()
                .map_err(|error| EnvError::new(TRUSTED_PROXY_HEADER, None, error))?,
            _ => ProxyHeader::XForwardedFor,
        };
        let proxies = var(TRUSTED_PROXIES).unwrap_or_default();
        Self::behind(&proxies, header).map_err(|error| EnvError::new(TRUSTED_PROXIES, None, error))
    }
}

const TRUSTED_PROXIES: &str = "TRUSTED_PROXIES";
const TRUSTED_PROXY_HEADER: &str = "TRUSTED_PROXY_HEADER";

impl Default for Config {
    fn default() -> Self {
        Self {
            client_ip: ClientIp::trusting([]),
            clock: Arc::new(SystemClock::new()),
            api_keys: ApiKeys::default(),
        }
    }
}

/// Makes one store per limit of the policy table: in memory here, shared
/// (Redis) elsewhere.
pub trait Stores {
    /// The store of a limit.
    type Store: Store<PolicyKey, CheckFuture: Unpin, WriteFuture: Unpin>;

    /// The store of the limit `name`, following `live` (the algorithm a
    /// reload of the policy file changes), banning a key it denies for
    /// `ban` (the limit's `ban = "1h"`), if set.
    fn store(&self, name: &str, live: &LiveAlgorithm, ban: Option<BanPolicy>) -> Self::Store;

    /// Reads where each limit's decisions come from now, for `GET /ready`
    /// (default: no list, every store in this instance's memory).
    fn states(&self) -> StatesFn {
        Arc::new(Vec::new)
    }
}

/// Each limit's store, where its decisions come from now, and how many
/// instances share it (counted through Redis; 1 in memory).
pub type StatesFn = Arc<dyn Fn() -> Vec<(String, StoreState, u64)> + Send + Sync>;

/// `GET /ready`: 200 while every store decides (in memory, on Redis, or
/// on the in-memory fallback while Redis fails), 503 when one cannot
/// (Redis failing and no fallback); JSON naming each limit's store state.
/// The example's limits fail open, so its stores always decide.
async fn ready(states: StatesFn) -> Response {
    let states = states();
    let all = states.iter().all(|(_, s, _)| s.decides());
    let stores: Vec<_> = states
        .iter()
        .map(|(limit, s, k)| json!({ "limit": limit, "state": s.as_str(), "instances": k }))
        .collect();
    let body = Json(json!({
        "status": if all { "ready" } else { "unavailable" },
        "store": if states.is_empty() { "memory" } else { "redis" },
        "stores": stores,
    }));
    let status = if all {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// In-memory stores, each capped at `max_keys` keys (default
/// [`hyper_example::max_keys::DEFAULT_MAX_KEYS`], a million; `RATELIMIT_MAX_KEYS`).
#[derive(Debug, Clone, Copy)]
pub struct MemoryStores {
    max_keys: usize,
}

impl Default for MemoryStores {
    fn default() -> Self {
        Self::new(hyper_example::max_keys::DEFAULT_MAX_KEYS)
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
    type Store = MemoryStore<LiveAlgorithm, PolicyKey>;

    fn store(&self, _name: &str, live: &LiveAlgorithm, ban: Option<BanPolicy>) -> Self::Store {
        MemoryStore::<LiveAlgorithm, PolicyKey>::builder(live.clone())
            .max_keys(Some(self.max_keys))
            .ban(ban)
            .build()
    }
}

/// The shipped policy file, `examples/axum/ratelimit.toml`: the default
/// when `RATELIMIT_CONFIG` is unset.
pub const POLICY_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ratelimit.toml");

/// The shipped policy, compiled in (what [`app`] and [`app_with`] use).
pub const DEFAULT_POLICY: &str = include_str!("../ratelimit.toml");

/// The shipped policy, parsed.
pub fn default_policy() -> PolicyTable {
    PolicyTable::from_toml(DEFAULT_POLICY, Some(std::path::Path::new(POLICY_FILE)))
        .expect("the shipped policy file is valid")
}

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

/// The app with the shipped limits kept in `stores`.
pub fn app_with<S: Stores>(config: &Config, stores: &S) -> Router {
    app_with_policy(config, stores, &default_policy())
        .expect("the shipped policy suits the app")
        .0
}

/// The app with the limits of `policy` kept in `stores`, and the handle
/// that reloads them. Besides the table's own keys, the policy may key on
/// `app:known-api-key` (a key listed in [`Config::api_keys`]; none for
/// an absent or unknown key, 400 for a malformed one) and
/// `app:anonymous-ip` (the client IP, for requests without a known key).
/// A limit on a route the app does not serve is an error naming it (see
/// [`served_routes`]).
pub fn app_with_policy<S: Stores>(
    config: &Config,
    stores: &S,
    policy: &PolicyTable,
) -> Result<(Router, PolicyHandle), PolicyError> {
    served_routes::check(policy)?;
    let keys = config.api_keys.clone();
    let list_items = move |req: Parts| list_items(keys, req);
    let chat_keys = config.api_keys.clone();
    let chat = move |report, req, body| chat::chat(chat_keys, report, req, body);
    let states = stores.states();
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
        .expect("the example's queue settings are valid");
    let report = || async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Json(json!({ "report": "ready" }))
    };
    let router = Router::new()
        .route("/reports", get(report).layer(reports))
        .route("/tickets", post(create_ticket))
        .route("/accounts", post(create_account))
        .route("/login", post(login_handler))
        .route("/api/items", get(list_items))
        .route("/v1/chat", post(chat))
        .route("/download", get(download::download))
        .route("/health", get(|| async { "ok" }))
        .route("/ready", get(move || ready(states.clone())));
    let mut options = PolicyOptions {
        client_ip: Some(config.client_ip.clone()),
        clock: Some(config.clock.clone()),
        ..PolicyOptions::default()
    };
    let keys = config.api_keys.clone();
    let known_key: AppKey = Arc::new(move |req: &Parts| keys.known(req).map(PolicyKey::Text));
    let (keys, client_ip) = (config.api_keys.clone(), config.client_ip.clone());
    let anonymous_ip: AppKey = Arc::new(move |req: &Parts| {
        if keys.known(req).is_ok() {
            return Err(KeyError::missing("anonymous client"));
        }
        client_ip.extract(req).map(PolicyKey::Ip)
    });
    options
        .app_keys
        .insert("known-api-key".to_owned(), known_key);
    options
        .app_keys
        .insert("anonymous-ip".to_owned(), anonymous_ip);
    policy.apply(router, &options, |spec| {
        Ok::<_, std::convert::Infallible>(stores.store(spec.name(), spec.live(), spec.ban()))
    })
}

// The limits' details are there when the policy file covers the route; a
// file that does not leaves the route unlimited, not broken.
async fn create_ticket(info: Option<Extension<RateLimitInfo>>) -> impl IntoResponse {
    let next = info
        .and_then(|Extension(info)| info.decisions().first().map(|d| d.decision.reset.as_secs()));
    (
        StatusCode::CREATED,
        Json(json!({ "ticket": "created", "next_ticket_in_seconds": next })),
    )
}

async fn create_account(info: Option<Extension<RateLimitInfo>>) -> impl IntoResponse {
    let remaining = info.map(|Extension(info)| info.remaining());
    (
        StatusCode::CREATED,
        Json(json!({ "account": "created", "remaining_today": remaining })),
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
