//! The replay: a policy file's layers exactly as
//! [`PolicyTable::apply`] builds them, in an axum router whose one handler
//! answers each request with the status the log recorded (so `count`
//! statuses refund as live), on a [`ManualClock`] set from each line's time.
//!
//! Nothing of the layer is copied: route matching (`HEAD` under `GET`),
//! tiers, keys, costs, algorithms, overrides and counted statuses are the
//! layer's own. Besides the router, the engine asks the table's public
//! API only to name things: [`PolicyEntry::applies_to`] and
//! [`PlanDirectory::plan_of`] (which limits saw a request) and [`KeySpec::extractor`](tower_ratelimit::policy::KeySpec::extractor)
//! (the key a limit refused).

use super::line::LogLine;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use ratelimit_core::algorithm::{stable_hash, StableKey};
use ratelimit_core::{LiveAlgorithm, ManualClock, MemoryStore};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use tower_ratelimit::key::KeyError;
use tower_ratelimit::policy::{
    AppKey, PlanDirectory, PolicyEntry, PolicyKey, PolicyOptions, PolicyTable,
};
use tower_ratelimit::strategy::KeyErrorPolicy;
use tower_ratelimit::RateLimitInfo;
use tower_service::Service;

/// One limit's store, kept to watch its key count.
type LimitStore = Arc<MemoryStore<LiveAlgorithm, PolicyKey>>;

/// What a policy makes of one request.
///
/// ```
/// use ratelimit_sim::whatif::engine::{Limited, Outcome};
///
/// let refused = Limited { limit: 0, key: "192.0.2.7".into(), dry_run: false };
/// let outcome = Outcome { seen: 0b1, limited: Some(refused), key_error: None, route: None };
/// assert_eq!(outcome.limited.map(|l| l.limit), Some(0)); // see Engine for a replay
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The limits whose layer checked it (bit `i`: the table's entry `i`).
    pub seen: u64,
    /// The limit that refused it (429; for a dry-run limit, would have),
    /// its key as the report shows it, and whether it was a dry run.
    pub limited: Option<Limited>,
    /// The limit that refused it for want of a usable key, and the
    /// status it answered (400, 401).
    pub key_error: Option<(usize, u16)>,
    /// The route it matched, `METHOD /path` (the path as the policy
    /// writes it), or `None` off every route the policy lists.
    pub route: Option<String>,
}

/// A refusal: by which limit, of which key.
///
/// ```
/// use ratelimit_sim::whatif::engine::Limited;
///
/// let refused = Limited { limit: 2, key: "203.0.113.0/24".into(), dry_run: true };
/// assert!(refused.dry_run); // the request went on: see Engine for a replay
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// The limit's index in the table.
    pub limit: usize,
    /// The key, as shown (hashed when secret or redacted).
    pub key: String,
    /// Whether the limit is in dry-run mode (the request went on).
    pub dry_run: bool,
}

/// The status a log line recorded, for the handler.
#[derive(Clone, Copy)]
struct Logged(StatusCode);

/// Marks the handler's answers (a layer's own answers lack it): the
/// decisions the request got (which limits checked it; a dry-run limit
/// may have denied it), and the route it matched.
#[derive(Clone)]
struct Echoed(Option<RateLimitInfo>, Option<MatchedPath>);

/// The path a limit without routes is matched on: every path.
const EVERY_PATH: &str = "/{*rest}";

/// How the engine names keys and rebuilds requests.
///
/// ```
/// use ratelimit_sim::whatif::engine::EngineOptions;
/// use tower_ratelimit::policy::PolicyOptions;
///
/// let options = EngineOptions {
///     policy: PolicyOptions::default(),
///     proxy_header: http::HeaderName::from_static("x-forwarded-for"),
///     max_keys: 1_000_000,
///     redact: true, // every key shown as a hash
/// };
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct EngineOptions {
    /// The table's options: client IPs (trusted proxies), app keys, clock.
    pub policy: PolicyOptions,
    /// The header a line's logged forwarding addresses are sent in.
    pub proxy_header: HeaderName,
    /// Each limit's store holds at most this many keys.
    pub max_keys: usize,
    /// Show every key as a hash.
    pub redact: bool,
}

/// A policy table's layers, ready to replay requests.
///
/// ```
/// use ratelimit_sim::whatif::engine::{Engine, EngineOptions, Outcome};
/// use ratelimit_sim::whatif::LogLine;
/// use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let text = "[[limit]]\nname = \"api\"\nalgorithm = \"fixed-window 1/1m\"\nkey = \"peer-ip\"\nroutes = [\"GET /api\"]\n";
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let options = EngineOptions {
///     policy: PolicyOptions::default(),
///     proxy_header: http::HeaderName::from_static("x-forwarded-for"),
///     max_keys: 1000,
///     redact: false,
/// };
/// let mut engine = Engine::new(&table, options).unwrap();
/// let line = |t| LogLine::new(t, "192.0.2.7".parse().unwrap(), ("GET", "/api"), 200, None);
/// let first: Outcome = engine.decide(&line(1_000_000_000)).await.unwrap();
/// assert!(first.limited.is_none());
/// let second = engine.decide(&line(2_000_000_000)).await.unwrap();
/// assert_eq!(second.limited.unwrap().key, "192.0.2.7");
/// # }
/// ```
pub struct Engine {
    router: Router,
    clock: Arc<ManualClock>,
    entries: Vec<PolicyEntry>,
    keys: Vec<AppKey>,
    stores: Vec<LimitStore>,
    options: EngineOptions,
    /// The same routes without the layers: the matched path of a request
    /// a layer answered.
    plain: Router,
    /// The table's plans: a limit scoped to another plan than a
    /// request's did not see it.
    plans: Arc<PlanDirectory>,
}

async fn echo(mut req: Request) -> Response {
    let status = req
        .extensions()
        .get::<Logged>()
        .map_or(StatusCode::OK, |l| l.0);
    let info = req.extensions_mut().remove::<RateLimitInfo>();
    let matched = req.extensions_mut().remove::<MatchedPath>();
    let mut res = Response::new(Body::empty());
    *res.status_mut() = status;
    res.extensions_mut().insert(Echoed(info, matched));
    res
}

/// The router: a route for every path the table lists, and one for every
/// other path, each answered by [`echo`].
fn routes(table: &PolicyTable) -> Router {
    let mut paths = BTreeSet::new();
    for entry in table.entries() {
        for route in &entry.routes {
            let text = route.to_string();
            let path = text.rsplit(' ').next().unwrap_or(&text).to_owned();
            paths.insert(path);
        }
    }
    // Off the listed routes, only limits without routes apply: then every
    // path needs a route (route layers do not wrap the fallback).
    if table.entries().iter().any(|e| e.routes.is_empty()) {
        paths.insert("/".to_owned());
        paths.insert(EVERY_PATH.to_owned());
    }
    paths
        .into_iter()
        .fold(Router::new(), |r, p| r.route(&p, any(echo)))
        .fallback(echo)
}

impl Engine {
    /// The layers of `table` (must be called inside a tokio runtime).
    pub fn new(table: &PolicyTable, options: EngineOptions) -> Result<Self, String> {
        let clock = Arc::new(ManualClock::new());
        let mut policy = options.policy.clone();
        policy.clock = Some(clock.clone());
        let options = EngineOptions { policy, ..options };
        let mut stores = Vec::new();
        let max_keys = options.max_keys;
        let (router, handle) = table
            .apply(routes(table), &options.policy, |spec| {
                let store: LimitStore = Arc::new(
                    MemoryStore::<LiveAlgorithm, PolicyKey>::builder(spec.live().clone())
                        .max_keys(Some(max_keys))
                        .ban(spec.ban())
                        .shards(1)
                        .build()?,
                );
                stores.push(store.clone());
                Ok::<_, ratelimit_core::ConfigError>(store)
            })
            .map_err(|e| e.to_string())?;
        let keys = table
            .entries()
            .iter()
            .map(|e| {
                e.key
                    .extractor(&options.policy)
                    .map_err(|m| format!("limit {:?}: {m}", e.name))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            router,
            clock,
            entries: table.entries().to_vec(),
            keys,
            stores,
            options,
            plain: routes(table),
            plans: Arc::clone(handle.plans()),
        })
    }

    /// The table's entries.
    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// The route `line`'s request matches, from the plain router.
    async fn matched(&mut self, line: &LogLine) -> Option<MatchedPath> {
        let req = self.request(line)?;
        let res = match self.plain.call(req).await {
            Ok(res) => res,
            Err(never) => match never {},
        };
        res.extensions().get::<Echoed>().and_then(|e| e.1.clone())
    }

    /// The bits of the limits that decided `info`'s request.
    fn bits(&self, info: &RateLimitInfo) -> u64 {
        info.decisions()
            .iter()
            .filter_map(|d| self.entries.iter().position(|e| e.name == d.name))
            .fold(0, |bits, i| bits | 1 << i)
    }

    /// The cap on each store's keys.
    pub fn max_keys(&self) -> usize {
        self.options.max_keys
    }

    /// How many keys each limit's store holds now.
    pub fn key_counts(&self) -> Vec<usize> {
        self.stores.iter().map(|s| s.len()).collect()
    }

    /// The request `line` records, as the app received it: method,
    /// target, the logged headers, and the logged remote address as the
    /// connection's peer.
    fn request(&self, line: &LogLine) -> Option<http::Request<Body>> {
        let method = Method::from_bytes(line.method.as_bytes()).ok()?;
        let uri: Uri = line.target.parse().ok()?;
        let mut req = http::Request::new(Body::empty());
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        let headers = req.headers_mut();
        if let Some(f) = &line.forwarded {
            headers.insert(
                self.options.proxy_header.clone(),
                HeaderValue::from_str(f).ok()?,
            );
        }
        for (name, value) in &line.headers {
            let name = HeaderName::try_from(name.as_str()).ok()?;
            headers.append(name, HeaderValue::from_str(value).ok()?);
        }
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(line.remote, 0)));
        Some(req)
    }

    /// The key text the report shows: secret keys (API keys, bearer
    /// tokens) always hashed, every key hashed under `redact`.
    fn key_text(&self, key: &PolicyKey) -> String {
        if key.is_secret() {
            format!("secret:{:08x}", stable_hash(key) >> 32)
        } else if self.options.redact {
            format!("key:{:08x}", stable_hash(key) >> 32)
        } else {
            key.to_string()
        }
    }
}

/// Whether a layer whose `on-key-error` is `policy` refuses a request
/// whose key failed with `e` (as the layer's `call` decides).
fn refuses(policy: KeyErrorPolicy, e: &KeyError) -> bool {
    match policy {
        KeyErrorPolicy::Reject => true,
        KeyErrorPolicy::Allow => false,
        KeyErrorPolicy::AllowMissing => !e.is_missing(),
    }
}

/// The limit named first in a 429's `RateLimit` fields: the denying
/// limit's, which it writes before the outer layers add theirs. (A `HEAD`
/// request's 429 has no body to name it: axum strips it.)
fn limit_in_headers(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get("ratelimit")?.to_str().ok()?;
    let name = value.strip_prefix('"')?;
    Some(&name[..name.find('"')?])
}

/// The limit named in a layer's 429 body (`"limit":"NAME"`).
fn limit_in_body(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find("\"limit\":\"")? + 9;
    let end = text[start..].find('"')? + start;
    Some(&text[start..end])
}

/// The route `METHOD /path` of a matched path (`None` for the catch-all
/// path of limits without routes).
fn route_of(m: Option<MatchedPath>, method: &Method) -> Option<String> {
    m.map(|m| m.as_str().to_owned())
        .filter(|r| r != EVERY_PATH)
        .map(|r| format!("{method} {r}"))
}

/// The limit that refused a request, and whether it is a dry run: a dry
/// run's is in the handler's echoed info; an enforced one's is named by
/// its 429 (body, else `RateLimit` field). `None` when that 429's body
/// can't be read.
async fn denier(
    echoed: Option<Option<&RateLimitInfo>>,
    head: &http::response::Parts,
    body: Body,
) -> Option<Option<(String, bool)>> {
    Some(match echoed {
        Some(info) => info
            .and_then(RateLimitInfo::denied)
            .map(|d| (d.name.to_owned(), true)),
        None if head.status == StatusCode::TOO_MANY_REQUESTS => {
            let bytes = axum::body::to_bytes(body, usize::MAX).await.ok()?;
            limit_in_body(&bytes)
                .or_else(|| limit_in_headers(&head.headers))
                .map(|n| (n.to_owned(), false))
        }
        None => None,
    })
}

impl Engine {
    /// Replays `line`: `None` when it holds no request http can carry (a
    /// bad method, target or header value).
    pub async fn decide(&mut self, line: &LogLine) -> Option<Outcome> {
        let (head, body) = self.answer(line).await?.into_parts();
        let echo = head.extensions.get::<Echoed>();
        let echoed = echo.map(|e| e.0.as_ref());
        if let Some(info) = echoed {
            // Admitted: the limits that checked it are in its decisions.
            if !info.is_some_and(RateLimitInfo::is_dry_run) {
                let seen = info.map_or(0, |i| self.bits(i));
                let method = Method::from_bytes(line.method.as_bytes()).ok()?;
                return Some(Outcome {
                    seen,
                    limited: None,
                    key_error: None,
                    route: route_of(echo.and_then(|e| e.1.clone()), &method),
                });
            }
        }
        let denier = denier(echoed, &head, body).await?;
        let key_error = (echoed.is_none() && head.status != StatusCode::TOO_MANY_REQUESTS)
            .then_some(head.status.as_u16());
        // The head again, as the layers saw it, to name what they did.
        let matched = match echo {
            Some(e) => e.1.clone(),
            None => self.matched(line).await,
        };
        let mut parts = self.request(line)?.into_parts().0;
        let route = route_of(matched.clone(), &parts.method);
        match matched {
            Some(m) => parts.extensions.insert(m),
            // No route layer saw it: off every route of the table.
            None => {
                return Some(Outcome {
                    seen: 0,
                    limited: None,
                    key_error: None,
                    route: None,
                })
            }
        };
        let (seen, limited, refused_key) = self.name(&parts, denier.as_ref(), key_error);
        Some(Outcome {
            seen,
            limited,
            key_error: refused_key.zip(key_error),
            route,
        })
    }

    /// The router's answer to `line`'s request, with the logged status,
    /// at the line's time.
    async fn answer(&mut self, line: &LogLine) -> Option<Response> {
        let mut req = self.request(line)?;
        let status = StatusCode::from_u16(line.status).unwrap_or(StatusCode::BAD_GATEWAY);
        req.extensions_mut().insert(Logged(status));
        self.clock.set_nanos(line.time);
        match self.router.call(req).await {
            Ok(res) => Some(res),
            Err(never) => match never {},
        }
    }

    /// What the layers did to a refused or dry-run-denied request whose
    /// head is `parts`: the bits of the limits that checked it, the limit
    /// `denier` names with its key, and the limit that refused it for
    /// want of a key (when the layers answered `key_error`).
    fn name(
        &self,
        parts: &http::request::Parts,
        denier: Option<&(String, bool)>,
        key_error: Option<u16>,
    ) -> (u64, Option<Limited>, Option<usize>) {
        let index = denier.and_then(|(name, _)| self.entries.iter().position(|e| &e.name == name));
        let enforced = denier.is_some_and(|(_, dry)| !dry);
        let mut seen = 0u64;
        let mut refused_key = None;
        let mut limited = None;
        let plan = self.plans.plan_of(parts);
        for (i, entry) in self.entries.iter().enumerate() {
            let of_plan = entry.plan.as_deref().is_none_or(|p| p == plan);
            if !of_plan || !entry.applies_to(parts, &self.options.policy) {
                continue;
            }
            // Without a key error, a limit that refuses keyless requests
            // had a key: it is keyed again only to name a refused key.
            let keyless_refused = entry.on_key_error == KeyErrorPolicy::Reject;
            if key_error.is_none() && keyless_refused && index != Some(i) {
                seen |= 1 << i;
                continue;
            }
            match self.keys[i](parts) {
                Ok(key) => {
                    seen |= 1 << i;
                    if index == Some(i) {
                        limited = Some(Limited {
                            limit: i,
                            key: self.key_text(&key),
                            dry_run: !enforced,
                        });
                        if enforced {
                            break;
                        }
                    }
                }
                // The layer refuses a request without a usable key unless
                // its `on-key-error` lets it pass (then it checks nothing).
                Err(e) if key_error.is_some() && refuses(entry.on_key_error, &e) => {
                    seen |= 1 << i;
                    refused_key = Some(i);
                    break;
                }
                Err(_) => {}
            }
        }
        (seen, limited, refused_key)
    }
}
