//! The axum example app of `tower-ratelimit`: one route per kind of limit,
//! every limit in one deployment file, served by the library
//! ([`tower_ratelimit::deploy::Limits`]).
//!
//! | route | limit |
//! |---|---|
//! | `POST /tickets` | 1 per 5 minutes per user (the bearer token), GCRA; no token: 401 |
//! | `POST /accounts` | 2 per day per client IP (an IPv4 address, an IPv6 /64) and 20 per day per network (an IPv4 /24, an IPv6 /48), sliding logs; only created accounts (201) count |
//! | `POST /login` | 5 failed attempts per hour per client IP and 100 per network; only failures (401) count; a success (200) resets the client's failures |
//! | `GET /api/items` | with a key listed in [`Config::api_keys`] (`X-API-Key`): token bucket per key, 500 burst, 100/s; without: 10 per minute per client IP; an unknown key: 401, counted as anonymous |
//! | `POST /v1/chat` | with a key listed in [`Config::api_keys`] (`X-API-Key`; else 401): 60 per minute and 100,000 tokens per day per key; the tokens, known after the handler runs, settle from `x-tokens-used` or, streamed, per event (a reservation of `x-max-tokens`, at most 40,000, and 40,000 without a positive decimal there; the handler delivers no more) |
//! | `GET /download` | 1 MiB, paced (never refused) at 256 KiB/s per client IP after a 64 KiB burst: about 3.75 s per download, each client with its own budget |
//! | `GET /reports` | about 100 ms each, at most 4 at once, fair-queued per client IP (8 waiting per client, 64 in all, none over 10 s) |
//! | `GET /health` | none |
//! | `GET /ready` | none: JSON with each limit's store state (`redis`, `fallback`, `memory`, `down`) and the instances sharing it (`instances`, counted through Redis: the fallback admits `1/instances` of each limit); 503 when one cannot decide |
//!
//! The limits live in `examples/axum/ratelimit.toml` ([`POLICY_FILE`]; the
//! binary reads `$RATELIMIT_CONFIG` instead when set): a deployment file,
//! the README's settings table over it (`REDIS_URL`, `TRUSTED_PROXIES`,
//! `ADMIN_ADDR`...). [`app_on`] builds the router on [`Limits`]; `main`
//! loads the file, builds the app and calls [`Limits::serve`].

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower_ratelimit::deploy::{DeployError, Limits, StoreStatus};
use tower_ratelimit::fair::FairQueueLayer;
use tower_ratelimit::key::{ClientIp, KeyError, KeyExtractor};
use tower_ratelimit::policy::{AppKey, PolicyKey, PolicyOptions};
use tower_ratelimit::Clock;

mod api_keys;
mod chat;
mod handlers;
pub use api_keys::{ApiKeys, API_KEY_CHALLENGE};
pub use chat::{EVENT_GAP, MAX_TOKENS_PER_CALL, TOKENS_PER_EVENT};
pub use handlers::{DOWNLOAD_BYTES, LOGIN_CHALLENGE};

/// The routes [`app_on`] serves, as `(method, path)`: a limit on any
/// other route would never apply, so it is refused
/// ([`PolicyTable::check_routes`](tower_ratelimit::policy::PolicyTable::check_routes)).
pub const SERVED: &[(&str, &str)] = &[
    ("GET", "/reports"),
    ("POST", "/tickets"),
    ("POST", "/accounts"),
    ("POST", "/login"),
    ("GET", "/api/items"),
    ("POST", "/v1/chat"),
    ("GET", "/download"),
    ("GET", "/health"),
    ("GET", "/ready"),
];

/// The app's own settings; the limits' come from the deployment file.
#[derive(Clone, Default)]
pub struct Config {
    /// The valid API keys (`API_KEYS`; none by default).
    pub api_keys: ApiKeys,
    /// The limits' clock (default: the system's; tests use a `ManualClock`).
    pub clock: Option<Arc<dyn Clock>>,
}

/// The shipped deployment file, `examples/axum/ratelimit.toml`: the
/// default when `RATELIMIT_CONFIG` is unset.
pub const POLICY_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ratelimit.toml");

/// The shipped deployment file, compiled in.
pub const DEFAULT_POLICY: &str = include_str!("../ratelimit.toml");

/// The app with the limits of `limits` applied (once per `Limits`).
/// Besides the file's own keys, a limit may key on `app:known-api-key` (a
/// key listed in [`Config::api_keys`]; none for an absent or unknown
/// key, 400 for a malformed one) and `app:anonymous-ip` (the client IP,
/// for requests without a known key). A limit on a route the app does
/// not serve is an error naming it (see [`SERVED`]).
pub fn app_on(limits: &Limits, config: &Config) -> Result<Router, DeployError> {
    limits.table().check_routes(SERVED).map_err(|mut e| {
        e.file = limits.file().map(Path::to_path_buf);
        DeployError::File(e)
    })?;
    let keys = config.api_keys.clone();
    let items = get(move |req| handlers::list_items(keys, req));
    let keys = config.api_keys.clone();
    let chat = post(move |report, req, body| chat::chat(keys, report, req, body));
    let ready = get(ready).with_state(limits.clone());
    let router = Router::new()
        .route("/reports", get(handlers::report).layer(reports(limits)))
        .route("/tickets", post(handlers::create_ticket))
        .route("/accounts", post(handlers::create_account))
        .route("/login", post(handlers::login))
        .route("/api/items", items)
        .route("/v1/chat", chat)
        .route("/download", get(handlers::download))
        .route("/health", get(|| async { "ok" }))
        .route("/ready", ready);
    let options = options(limits, config);
    limits.clone().with_options(options).apply(router)
}

/// `GET /reports`' queue: at most 4 at once, fair-queued by client IP: 8
/// waiting per client, 64 in all, none longer than 10 s; a client whose
/// queue is full gets 429, anyone when the whole queue is full gets 503.
fn reports(limits: &Limits) -> FairQueueLayer<ClientIp> {
    FairQueueLayer::builder(limits.client_ip())
        .name("reports")
        .concurrency(4)
        .max_per_key(8)
        .max_total(64)
        .max_wait(Duration::from_secs(10))
        .build()
        .expect("the example's queue settings are valid")
}

/// The app's part of the limits' options: its clock and its two keys.
fn options(limits: &Limits, config: &Config) -> PolicyOptions {
    let (keys, client_ip) = (config.api_keys.clone(), limits.client_ip());
    let known = keys.clone();
    let known: AppKey = Arc::new(move |req| known.known(req).map(PolicyKey::Text));
    let anonymous: AppKey = Arc::new(move |req| match keys.known(req) {
        Ok(_) => Err(KeyError::missing("anonymous client")),
        Err(_) => client_ip.extract(req).map(PolicyKey::Ip),
    });
    let app_keys = [("known-api-key", known), ("anonymous-ip", anonymous)];
    PolicyOptions {
        clock: config.clock.clone(),
        app_keys: BTreeMap::from(app_keys.map(|(name, key)| (name.to_owned(), key))),
        ..PolicyOptions::default()
    }
}

/// `GET /ready`: 200 while every limit's store decides (in memory, on
/// Redis, or on the in-memory fallback while Redis fails), 503 when one
/// cannot; JSON naming each limit's store state.
async fn ready(State(limits): State<Limits>) -> Response {
    let stores = limits.stores();
    let all = stores.iter().all(|s| s.state.decides());
    let memory = stores.iter().all(|s| s.state.as_str() == "memory");
    let one = |s: &StoreStatus| json!({"limit": s.limit, "state": s.state.as_str(), "instances": s.instances});
    let list: Vec<_> = stores.iter().map(one).collect();
    let store = if memory { "memory" } else { "redis" };
    if all {
        Json(json!({ "status": "ready", "store": store, "stores": list })).into_response()
    } else {
        let body = json!({ "status": "unavailable", "store": store, "stores": list });
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}
