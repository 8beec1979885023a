//! How a limit finds a request's key (`PolicyOptions`, the extractor built from a `KeySpec`), its lists and tiers.

use super::digest_overrides::DigestOverrides;
use super::key::{KeyPart, KeySpec, PolicyKey};
use super::plan_book::{PlanBook, PlanId};
use super::plan_sources::PlanKeys;
use super::route::RouteSpec;
use super::tier::Tier;
use crate::access_list::{AccessList, IpSource, KeyProbe, ListKind, RuntimeLists};
use crate::key::{
    ApiKey, Bearer, ClientIp, Global, Header, IpPrefixes, KeyError, KeyExtractor, PeerIp, Route,
};
use crate::limit_handle::TextPart;
use http::request::Parts;
use ratelimit_core::Clock;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A key the app defines (`key = "app:NAME"`): the key of a request, or
/// why there is none (as a [`KeyExtractor`] answers).
///
/// ```
/// use std::sync::Arc;
/// use tower_ratelimit::key::{HeaderKey, KeyExtractor, PeerIp};
/// use tower_ratelimit::policy::{AppKey, PolicyKey, PolicyOptions};
///
/// // `key = "app:tenant"`: the X-Tenant header, or the peer's address.
/// let peer = PeerIp::new();
/// let tenant: AppKey = Arc::new(move |req| match req.headers.get("x-tenant") {
///     Some(v) => Ok(PolicyKey::Text(HeaderKey::new(v.as_bytes()))),
///     None => peer.extract(req).map(PolicyKey::Ip),
/// });
/// let mut options = PolicyOptions::default();
/// options.app_keys.insert("tenant".into(), tenant);
/// ```
pub type AppKey = Arc<dyn Fn(&Parts) -> Result<PolicyKey, KeyError> + Send + Sync>;

/// Whether a request comes from an authenticated client.
///
/// ```
/// use std::sync::Arc;
/// use tower_ratelimit::policy::{Authenticated, PolicyOptions};
///
/// // Tier "authenticated": requests with a session cookie.
/// let authenticated: Authenticated = Arc::new(|req| req.headers.contains_key("cookie"));
/// let options = PolicyOptions { authenticated: Some(authenticated), ..PolicyOptions::default() };
/// # let _ = options;
/// ```
pub type Authenticated = Arc<dyn Fn(&Parts) -> bool + Send + Sync>;

impl KeySpec {
    /// The key this spec gives a request, computed exactly as a table's
    /// layer computes it (the same extractors, the same composite), but
    /// without the entry's routes and tier: for tools that replay requests
    /// a layer limited and need to name the key (`ratelimit-sim what-if`),
    /// and for an `app:NAME` key defined as another spec. Fails, naming
    /// it, on an `app:NAME` part that `options` does not define.
    pub fn extractor(&self, options: &PolicyOptions) -> Result<AppKey, String> {
        let parts: Box<[Part]> = self
            .0
            .iter()
            .map(|p| Part::new(p, options))
            .collect::<Result<_, _>>()?;
        Ok(Arc::new(move |req: &Parts| extract_parts(&parts, req)))
    }
}

/// The key `parts` give `req`: the one part's, or a composite of all.
pub(super) fn extract_parts(parts: &[Part], req: &Parts) -> Result<PolicyKey, KeyError> {
    match parts {
        [one] => one.extract(req),
        parts => Ok(PolicyKey::Composite(
            parts
                .iter()
                .map(|p| p.extract(req))
                .collect::<Result<_, _>>()?,
        )),
    }
}

/// Without [`PolicyOptions::authenticated`]: a request with an
/// `Authorization` or `X-API-Key` header.
pub(super) fn has_credentials(req: &Parts) -> bool {
    req.headers.contains_key(http::header::AUTHORIZATION) || req.headers.contains_key("x-api-key")
}

/// What the table's layers need from the app.
///
/// ```
/// use tower_ratelimit::key::{ClientIp, ProxyHeader};
/// use tower_ratelimit::policy::PolicyOptions;
///
/// let mut options = PolicyOptions::default();
/// options.client_ip = Some("10.0.0.0/8".parse::<ClientIp>().unwrap().header(ProxyHeader::X_REAL_IP));
/// ```
#[derive(Clone, Default)]
pub struct PolicyOptions {
    /// Tells authenticated clients (tier `authenticated`) from anonymous
    /// ones (tier `anonymous`): say, an API key the app knows. Default: a
    /// request with an `Authorization` or `X-API-Key` header.
    pub authenticated: Option<Authenticated>,
    /// The keys named `app:NAME` in the table, by `NAME` (the user of a
    /// session, an API key the app checks...).
    pub app_keys: BTreeMap<String, AppKey>,
    /// The lists of plans with `keys-app = "NAME"`, by `NAME`.
    pub plan_keys: BTreeMap<String, PlanKeys>,
    /// The proxies whose forwarding headers `client-ip` trusts (default:
    /// none, so `client-ip` is the peer's address).
    pub client_ip: Option<ClientIp>,
    /// The clock (default: the layer's).
    pub clock: Option<Arc<dyn Clock>>,
}

impl fmt::Debug for PolicyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyOptions")
            .field("client_ip", &self.client_ip)
            .field("authenticated", &self.authenticated.is_some())
            .field("app_keys", &self.app_keys.keys().collect::<Vec<_>>())
            .field("plan_keys", &self.plan_keys.keys().collect::<Vec<_>>())
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

/// One part of an extractor.
pub(super) enum Part {
    PeerIp(PeerIp),
    ClientIp(ClientIp),
    Header(Header),
    ApiKey(ApiKey),
    Bearer(Bearer),
    Global,
    Route,
    App(AppKey),
}

impl Part {
    pub(super) fn new(part: &KeyPart, options: &PolicyOptions) -> Result<Self, String> {
        let client_ip = &options.client_ip;
        Ok(match part {
            KeyPart::PeerIp(prefixes) => {
                Self::PeerIp(PeerIp::new().prefixes(prefixes.unwrap_or_default()))
            }
            KeyPart::ClientIp(prefixes) => {
                let x = client_ip.clone().unwrap_or_default();
                Self::ClientIp(match prefixes {
                    Some(p) => x.prefixes(*p),
                    None => x,
                })
            }
            KeyPart::Header(name, secret) => {
                let header = Header::new(name.clone());
                // `secret-header:` marks any header; credential headers
                // (Authorization, Cookie, X-API-Key...) are secret anyway.
                Self::Header(if *secret { header.secret(true) } else { header })
            }
            KeyPart::ApiKey => Self::ApiKey(ApiKey::new()),
            KeyPart::Bearer => Self::Bearer(Bearer::new()),
            KeyPart::Global => Self::Global,
            KeyPart::Route => Self::Route,
            KeyPart::App(name) => match options.app_keys.get(name) {
                Some(key) => Self::App(Arc::clone(key)),
                None => return Err(format!("unknown key \"app:{name}\": the app defines none")),
            },
            KeyPart::Descriptor(name) => {
                return Err(format!(
                    "key \"descriptor:{name}\" is a descriptor entry's value: ratelimitd's \
                     plans only (an HTTP request has no descriptors)"
                ))
            }
        })
    }

    pub(super) fn extract(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
        Ok(match self {
            Self::PeerIp(x) => PolicyKey::Ip(x.extract(req)?),
            Self::ClientIp(x) => PolicyKey::Ip(x.extract(req)?),
            Self::Header(x) => PolicyKey::Text(x.extract(req)?),
            Self::ApiKey(x) => PolicyKey::Text(x.extract(req)?),
            Self::Bearer(x) => PolicyKey::Text(x.extract(req)?),
            Self::Global => {
                Global.extract(req)?;
                PolicyKey::Global
            }
            Self::Route => PolicyKey::Route(Route.extract(req)?),
            Self::App(f) => f(req)?,
        })
    }
}

/// Whether an entry on `routes` (none: every route) for `tier` checks
/// `req`, as `authenticated` (default: [`has_credentials`]) tells clients
/// apart.
pub(super) fn applies(
    routes: &[RouteSpec],
    tier: Tier,
    authenticated: Option<&Authenticated>,
    req: &Parts,
) -> bool {
    if !routes.is_empty() && !routes.iter().any(|r| r.matches(req)) {
        return false;
    }
    if tier == Tier::All {
        return true;
    }
    let authenticated = match authenticated {
        Some(f) => f(req),
        None => has_credentials(req),
    };
    authenticated == (tier == Tier::Authenticated)
}

/// How a part of a key is written as text, for [`LimitHandle::key`].
pub(super) fn text_part(part: &KeyPart, options: &PolicyOptions) -> TextPart {
    let client = options
        .client_ip
        .as_ref()
        .map_or_else(IpPrefixes::default, ClientIp::key_prefixes);
    match part {
        KeyPart::PeerIp(p) => TextPart::Ip(p.unwrap_or_default()),
        KeyPart::ClientIp(p) => TextPart::Ip(p.unwrap_or(client)),
        KeyPart::Header(name, secret) => TextPart::Text {
            secret: *secret || crate::key::header::is_credential(name),
        },
        KeyPart::ApiKey | KeyPart::Bearer | KeyPart::Descriptor(_) => {
            TextPart::Text { secret: true }
        }
        KeyPart::Global => TextPart::Global,
        KeyPart::Route => TextPart::Route,
        KeyPart::App(_) => TextPart::App,
    }
}

/// Where the lists of a limit keyed on `key` read the client IP: its
/// first IP part's source, else the client through the trusted proxies.
pub(super) fn ip_source(key: &KeySpec, options: &PolicyOptions) -> IpSource {
    let client = || IpSource::Client(options.client_ip.clone().unwrap_or_default());
    for part in &key.0 {
        match part {
            KeyPart::PeerIp(_) => return IpSource::Peer,
            KeyPart::ClientIp(_) => return client(),
            _ => {}
        }
    }
    client()
}

/// The key extractor of a table's entry.
pub(super) struct PolicyExtractor {
    /// The limit's name (for metrics).
    pub(super) name: &'static str,
    /// Whether it has an allow or deny entry.
    pub(super) lists: bool,
    pub(super) allow: AccessList,
    pub(super) deny: AccessList,
    pub(super) ip: IpSource,
    /// The entries added at run time, on every limit.
    pub(super) runtime: Arc<RuntimeLists>,
    /// The limit's overrides shared by digest.
    pub(super) digests: Arc<DigestOverrides>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) tier: Tier,
    pub(super) authenticated: Option<Authenticated>,
    pub(super) routes: Box<[RouteSpec]>,
    pub(super) parts: Box<[Part]>,
    /// The plan whose requests it counts, and the table's plans.
    pub(super) plan: Option<(PlanId, Arc<PlanBook>)>,
}

impl KeyExtractor for PolicyExtractor {
    type Key = PolicyKey;

    fn extract(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
        if !applies(&self.routes, self.tier, self.authenticated.as_ref(), req) {
            return Ok(PolicyKey::Skip);
        }
        if let Some((plan, book)) = &self.plan {
            if book.request_plan(req) != *plan {
                return Ok(PolicyKey::Skip);
            }
        }
        let runtime = self.runtime.is_set();
        let lists = self.lists || runtime;
        let digests = self.digests.is_set();
        if !lists && !digests {
            return self.key(req);
        }
        let ip = if lists { self.ip.addr(req) } else { None };
        let now = if runtime { self.clock.now() } else { 0 };
        let listed = |kind: ListKind, list: &AccessList, key: Option<&KeyProbe<'_>>| {
            let on_runtime = || runtime && self.runtime.has(kind, ip, key, now);
            match key {
                None => list.has_ip(ip) || on_runtime(),
                Some(k) => list.has_key(k.text()) || on_runtime(),
            }
        };
        if lists && listed(ListKind::Deny, &self.deny, None) {
            crate::observe::denied_by_list(self.name);
            return Err(KeyError::denied("client IP"));
        }
        if lists && listed(ListKind::Allow, &self.allow, None) {
            crate::observe::allowed_by_list(self.name);
            return Ok(PolicyKey::Skip);
        }
        let key = self.key(req)?;
        let text = key.to_string();
        // One digest of the key at most, shared by the lists and overrides.
        let probe = KeyProbe::new(&text);
        if lists && listed(ListKind::Deny, &self.deny, Some(&probe)) {
            crate::observe::denied_by_list(self.name);
            return Err(KeyError::denied("client key"));
        }
        if lists && listed(ListKind::Allow, &self.allow, Some(&probe)) {
            crate::observe::allowed_by_list(self.name);
            return Ok(PolicyKey::Skip);
        }
        if digests && ratelimit_core::algorithm::StableKey::is_secret(&key) {
            self.digests.apply(&key, &probe);
        }
        Ok(key)
    }
}

impl PolicyExtractor {
    /// The request's key, lists aside.
    pub(super) fn key(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
        extract_parts(&self.parts, req)
    }
}
