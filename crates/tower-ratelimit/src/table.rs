//! A policy table: every limit of an app as data, read from a TOML file and
//! turned into layers of an axum [`Router`] by one call (feature `serde`).
//!
//! ```toml
//! # Each [[limit]] is one layer; they are checked in this order.
//! [[limit]]
//! name = "tickets"
//! algorithm = "gcra 1/5m"           # ratelimit-core's spec form, or a table
//! key = "bearer"                    # see below
//! routes = ["POST /tickets"]        # "METHOD /path" or "/path"; none: every route
//!
//! [[limit]]
//! name = "login-failures"
//! algorithm = "sliding-log 5/1h"
//! key = "client-ip"
//! routes = ["POST /login"]
//! count = [401]                     # only these statuses count (default: all)
//! reset-on = [200]                  # these statuses reset the key (a login succeeded)
//! ban = "1h"                        # once denied, the key stays denied for 1 hour
//! ban-escalate = 2.0                # each repeat offence doubles the ban (default 1)...
//! ban-max = "24h"                   # ...up to 24 hours (default: the ban)...
//! ban-forgive = "1d"                # ...until 1 day passes without one (default 0)
//!
//! [[limit]]
//! name = "search"
//! algorithm = "leaky-bucket 10/1s queue 5"
//! key = "client-ip+route"           # a composite: both parts
//! mode = "shape"                    # enforce (default), dry-run, shape
//! cost = 1                          # default 1; 1 to the capacity
//! headers = "ietf"                  # ietf (default), legacy, both, none
//! on-key-error = "reject"           # reject (default), allow, allow-missing
//! tier = "anonymous"                # all (default), anonymous, authenticated
//! overrides = { "10.0.0.7|POST /search" = "leaky-bucket 100/1s queue 50" }
//! ```
//!
//! Keys: `peer-ip`, `client-ip` (through the trusted proxies of
//! [`PolicyOptions::client_ip`]), `header:NAME`, `secret-header:NAME` (a
//! header carrying a credential), `api-key` (`X-API-Key`), `bearer`, `global`, `route` (method and matched path), `app:NAME` (a
//! key the app defines in [`PolicyOptions::app_keys`]: a user, a checked
//! API key...), and composites joined by `+` (`client-ip+route`).
//!
//! An IP key takes prefix lengths per family in parentheses:
//! `client-ip(v4/24, v6/48)` keys an IPv4 client by its /24 and an IPv6
//! client by its /48; a family left out takes its default
//! (`client-ip(v6/48)` keeps IPv4 at /32). Without parentheses
//! `peer-ip` is v4/32, v6/64, and `client-ip` takes the prefixes of
//! [`PolicyOptions::client_ip`] (v4/32, v6/64 unless the app set others).
//! IPv4-mapped IPv6 addresses are IPv4. A bare length (`client-ip/48`)
//! is refused: it would not say which family it is for. To hold a client
//! to a limit per address and another per network, write two entries:
//!
//! ```toml
//! [[limit]]
//! name = "login-failures"
//! algorithm = "sliding-log 5/1h"
//! key = "client-ip"                 # one IPv4 address, one IPv6 /64
//! routes = ["POST /login"]
//! count = [401]
//!
//! [[limit]]
//! name = "login-failures-network"
//! algorithm = "sliding-log 100/1h"
//! key = "client-ip(v4/24, v6/48)"   # however a client rotates inside them
//! routes = ["POST /login"]
//! count = [401]
//! ```
//!
//! A length out of range (`v4/0`, `v4/33`, `v6/129`) is refused at load,
//! naming it and the limit: `ratelimit.toml:9: limit "login-failures-network":
//! key "client-ip(v6/129)": bad IPv6 prefix /129: expected 1 to 128`.
//!
//! Routes are matched against axum's matched path (the route as written,
//! `/users/{id}`), or the request's path outside a router; a request on a
//! route the entry does not list passes that layer untouched. A `GET`
//! route also covers `HEAD` (which axum answers with the `GET` handler).
//!
//! Methods are case-sensitive: `post /login` is refused at load (no client
//! sends a `post`).
//!
//! An override's key is the key's text as the limit's extractor writes
//! it, its parts joined by `|`. IP parts are read as an address or a
//! network and written in the key's form (`2001:DB8:0:1::5` on a
//! `client-ip` limit is `2001:db8:0:1::/64`); a key no request can have is
//! refused at load: not an address, a network of another length than the
//! limit keys (a /48 on a per-/64 limit), blanks around a header's value,
//! a header key over 64 characters (those are keyed by a hash), a wrong
//! number of parts, or two overrides for one key. A secret key (API key,
//! bearer token) is never quoted in the error.
//!
//! A limit that could never limit is refused at load: `cost = 0` (every
//! request a peek), a cost above the capacity of the algorithm or of an
//! override (every request refused), and `count = []` (nothing counts).
//! To watch a limit without enforcing it, use `mode = "dry-run"`.
//!
//! Every error names the file, the line, and the entry:
//! `limits.toml:7: limit "tickets": unknown key "baerer"`.
//!
//! [`PolicyTable::apply`] returns a [`PolicyHandle`] too: it reloads the
//! algorithms and overrides from an edited table or file (on `SIGHUP` and
//! on file change with [`PolicyHandle::watch`]), freeing nothing any
//! client has used: a limit lowered and raised back keeps what was used
//! past it, a change of kind charges what was used, and a reload of an
//! unchanged file changes nothing for any key (see [`LiveAlgorithm`]). It
//! also adds or removes per-key overrides at run time.
//! A bad file is rejected whole, with a logged error, and the running
//! limits stay.
//!
//! ```
//! use axum::{routing::post, Router};
//! use ratelimit_core::{LiveAlgorithm, MemoryStore};
//! use std::convert::Infallible;
//! use tower_ratelimit::table::{PolicyKey, PolicyOptions, PolicyTable};
//!
//! let table = PolicyTable::from_toml(
//!     "[[limit]]\nname = \"login\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [\"POST /login\"]\n",
//!     None,
//! )?;
//! let router = Router::new().route("/login", post(|| async { "ok" }));
//! let (router, handle) = table.apply(router, &PolicyOptions::default(), |_, live: &LiveAlgorithm| {
//!     Ok::<_, Infallible>(MemoryStore::<_, PolicyKey>::new(live.clone()))
//! })?;
//! # let _ = (router, handle);
//! # Ok::<(), tower_ratelimit::table::PolicyError>(())
//! ```

use crate::access_list::{AccessList, IpSource, RuntimeLists};
pub use crate::access_list::{ListKind, MAX_RUNTIME_ENTRIES};
use crate::key::{
    ApiKey, Bearer, ClientIp, Global, Header, HeaderKey, IpKey, IpPrefixes, KeyError, KeyExtractor,
    PeerIp, Route, RouteKey,
};
pub use crate::limit_handle::LimitHandle;
use crate::limit_handle::TextPart;
use crate::override_key::{canonical, OverridePart};
use crate::policy::{KeyErrorPolicy, Mode, Selection};
use crate::response::Headers;
use crate::RateLimitLayer;
use axum::extract::MatchedPath;
use axum::Router;
use http::request::Parts;
use http::{Method, StatusCode};
use ratelimit_core::{
    AnyAlgorithm, BanPolicy, BoxStore, Clock, LiveAlgorithm, MemoryStore, StableHasher, StableKey,
    Store, MAX_OVERRIDES,
};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why a policy table was rejected: where, which entry, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file, when the table was read from one.
    pub file: Option<PathBuf>,
    /// The line (1-based), when known.
    pub line: Option<usize>,
    /// The entry's name, when known.
    pub entry: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if let Some(entry) = &self.entry {
            write!(f, "limit {entry:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PolicyError {}

/// One part of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyPart {
    /// The peer's address, at these prefix lengths (none given: the
    /// default, v4/32 and v6/64).
    PeerIp(Option<IpPrefixes>),
    /// The client's address, at these prefix lengths (none given: those of
    /// [`PolicyOptions::client_ip`]).
    ClientIp(Option<IpPrefixes>),
    /// A header, and whether its values are secret.
    Header(http::HeaderName, bool),
    ApiKey,
    Bearer,
    Global,
    Route,
    App(String),
}

/// What an entry keys on: one part, or several joined by `+`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec(Vec<KeyPart>);

/// `NAME` or `NAME(v4/N, v6/N)`: the prefix lengths of an IP key, if any.
fn ip_part(part: &str, name: &str, key: &str) -> Option<Result<Option<IpPrefixes>, String>> {
    let rest = part.strip_prefix(name)?.trim_start();
    if rest.is_empty() {
        return Some(Ok(None));
    }
    let list = rest.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        list.parse::<IpPrefixes>()
            .map(Some)
            .map_err(|e| format!("key {key:?}: {e}")),
    )
}

/// One `+`-separated part of the key `key`.
fn key_part(part: &str, key: &str) -> Result<KeyPart, String> {
    if let Some(prefixes) = ip_part(part, "client-ip", key) {
        return prefixes.map(KeyPart::ClientIp);
    }
    if let Some(prefixes) = ip_part(part, "peer-ip", key) {
        return prefixes.map(KeyPart::PeerIp);
    }
    Ok(match part {
        "api-key" => KeyPart::ApiKey,
        "bearer" => KeyPart::Bearer,
        "global" => KeyPart::Global,
        "route" => KeyPart::Route,
        other => match (
            other
                .strip_prefix("header:")
                .map(|n| (n, false))
                .or_else(|| other.strip_prefix("secret-header:").map(|n| (n, true))),
            other.strip_prefix("app:"),
        ) {
            (Some((name, secret)), _) => match http::HeaderName::try_from(name) {
                Ok(name) => KeyPart::Header(name, secret),
                Err(_) => return Err(format!("bad header name {name:?} in key {key:?}")),
            },
            (_, Some(name)) if !name.is_empty() => KeyPart::App(name.to_owned()),
            _ => {
                return Err(format!(
                    "unknown key {other:?}: expected peer-ip, client-ip (either with prefix \
                     lengths, as in client-ip(v4/24, v6/48)), header:NAME, secret-header:NAME, \
                     api-key, bearer, global, route, app:NAME, or several joined by +"
                ))
            }
        },
    })
}

impl FromStr for KeySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts = s
            .split('+')
            .map(|p| key_part(p.trim(), s))
            .collect::<Result<Vec<_>, String>>()?;
        if parts.len() > 4 {
            return Err(format!("key {s:?} has more than 4 parts"));
        }
        Ok(Self(parts))
    }
}

impl KeyPart {
    /// What an override's key looks like in this part.
    fn override_part(&self) -> OverridePart {
        match self {
            Self::PeerIp(p) | Self::ClientIp(p) => OverridePart::Ip(p.unwrap_or_default()),
            Self::Header(_, secret) => OverridePart::Text { secret: *secret },
            Self::ApiKey | Self::Bearer => OverridePart::Text { secret: true },
            Self::Global | Self::Route | Self::App(_) => OverridePart::Any,
        }
    }
}

impl fmt::Display for KeyPart {
    /// The form the policy file writes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = |f: &mut fmt::Formatter<'_>, name: &str, p: &Option<IpPrefixes>| match p {
            None => f.write_str(name),
            Some(p) => write!(f, "{name}({p})"),
        };
        match self {
            Self::PeerIp(p) => ip(f, "peer-ip", p),
            Self::ClientIp(p) => ip(f, "client-ip", p),
            Self::Header(name, false) => write!(f, "header:{name}"),
            Self::Header(name, true) => write!(f, "secret-header:{name}"),
            Self::ApiKey => f.write_str("api-key"),
            Self::Bearer => f.write_str("bearer"),
            Self::Global => f.write_str("global"),
            Self::Route => f.write_str("route"),
            Self::App(name) => write!(f, "app:{name}"),
        }
    }
}

impl fmt::Display for KeySpec {
    /// The form the policy file writes: parts joined by `+`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

impl fmt::Display for RouteSpec {
    /// `METHOD /path`, or `/path` for any method.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{m} {}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// A route an entry applies to: a method (or any) and a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    method: Option<Method>,
    path: String,
}

impl FromStr for RouteSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (method, path) = match s.trim().split_once(' ') {
            Some((m, p)) => {
                // Methods are case-sensitive (RFC 9110): `post` is an
                // extension method no client sends for POST.
                if m.bytes().any(|b| b.is_ascii_lowercase()) {
                    return Err(format!(
                        "bad method {m:?} in route {s:?}: methods are case-sensitive, \
                         write {:?}",
                        m.to_ascii_uppercase()
                    ));
                }
                let m =
                    Method::from_str(m).map_err(|_| format!("bad method {m:?} in route {s:?}"))?;
                (Some(m), p.trim())
            }
            None => (None, s.trim()),
        };
        if !path.starts_with('/') || path.contains(char::is_whitespace) {
            return Err(format!(
                "bad route {s:?}: expected \"/path\" or \"METHOD /path\""
            ));
        }
        Ok(Self {
            method,
            path: path.to_owned(),
        })
    }
}

impl RouteSpec {
    fn matches(&self, req: &Parts) -> bool {
        // A GET route covers HEAD too: axum answers HEAD with the GET
        // handler, so a HEAD must not pass the GET's limit.
        let covers =
            |m: &Method| *m == req.method || (*m == Method::GET && req.method == Method::HEAD);
        if self.method.as_ref().is_some_and(|m| !covers(m)) {
            return false;
        }
        match req.extensions.get::<MatchedPath>() {
            Some(m) => m.as_str() == self.path,
            None => req.uri.path() == self.path,
        }
    }
}

fn parsed<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = String>,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

fn parsed_list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = String>,
{
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .collect()
}

fn statuses<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<StatusCode>>, D::Error> {
    Vec::<u16>::deserialize(d)?
        .into_iter()
        .map(|n| {
            StatusCode::from_u16(n).map_err(|_| {
                serde::de::Error::custom(format!("bad status {n}: expected 100 to 999"))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    match String::deserialize(d)?.as_str() {
        "enforce" => Ok(Mode::Enforce),
        "dry-run" => Ok(Mode::DryRun),
        "shape" => Ok(Mode::Shape),
        other => Err(serde::de::Error::custom(format!(
            "bad mode {other:?}: expected enforce, dry-run or shape"
        ))),
    }
}

fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Headers, D::Error> {
    match String::deserialize(d)?.as_str() {
        "ietf" => Ok(Headers::new()),
        "legacy" => Ok(Headers::new().ietf(false).legacy(true)),
        "both" => Ok(Headers::new().legacy(true)),
        "none" => Ok(Headers::none()),
        other => Err(serde::de::Error::custom(format!(
            "bad headers {other:?}: expected ietf, legacy, both or none"
        ))),
    }
}

fn key_error<'de, D: Deserializer<'de>>(d: D) -> Result<KeyErrorPolicy, D::Error> {
    match String::deserialize(d)?.as_str() {
        "reject" => Ok(KeyErrorPolicy::Reject),
        "allow" => Ok(KeyErrorPolicy::Allow),
        "allow-missing" => Ok(KeyErrorPolicy::AllowMissing),
        other => Err(serde::de::Error::custom(format!(
            "bad on-key-error {other:?}: expected reject, allow or allow-missing"
        ))),
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<std::time::Duration>, D::Error> {
    let s = String::deserialize(d)?;
    ratelimit_core::parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn one() -> u64 {
    1
}

/// Which clients an entry applies to, as [`PolicyOptions::authenticated`]
/// tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Every client (the default).
    #[default]
    All,
    /// Only clients that are not authenticated.
    Anonymous,
    /// Only authenticated clients.
    Authenticated,
}

/// One named limit of a [`PolicyTable`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PolicyEntry {
    /// The limit's name (shown in the `RateLimit` headers).
    pub name: String,
    /// The algorithm and its settings.
    pub algorithm: AnyAlgorithm,
    /// What the limit keys on.
    #[serde(deserialize_with = "parsed")]
    pub key: KeySpec,
    /// The routes it applies to; empty: every route.
    #[serde(default, deserialize_with = "parsed_list")]
    pub routes: Vec<RouteSpec>,
    /// The cost of each request (default 1).
    #[serde(default = "one")]
    pub cost: u64,
    /// The statuses that count; `None`: every response.
    #[serde(default, deserialize_with = "statuses")]
    pub count: Option<Vec<StatusCode>>,
    /// The statuses that reset the key on this limit (a successful login
    /// clears the failures); `None`: none.
    #[serde(default, deserialize_with = "statuses")]
    pub reset_on: Option<Vec<StatusCode>>,
    /// Once the limit denies a key, the key stays denied this long,
    /// whatever the algorithm says (`ban = "1h"`).
    #[serde(default, deserialize_with = "duration")]
    pub ban: Option<std::time::Duration>,
    /// Each repeat offence multiplies the ban by this (default 1: none).
    #[serde(default)]
    pub ban_escalate: Option<f64>,
    /// The longest an escalated ban gets (default: the ban).
    #[serde(default, deserialize_with = "duration")]
    pub ban_max: Option<std::time::Duration>,
    /// A key banned, then left alone this long after its ban ended, starts
    /// over at the base ban (default 0: every ban is a first).
    #[serde(default, deserialize_with = "duration")]
    pub ban_forgive: Option<std::time::Duration>,
    /// Enforce, dry-run or shape.
    #[serde(default, deserialize_with = "mode")]
    pub mode: Mode,
    /// Which header fields to send.
    #[serde(default, deserialize_with = "headers")]
    pub headers: Headers,
    /// What to do when the request has no usable key.
    #[serde(default, deserialize_with = "key_error")]
    pub on_key_error: KeyErrorPolicy,
    /// Which clients the limit applies to: `all` (default), `anonymous` or
    /// `authenticated`.
    #[serde(default)]
    pub tier: Tier,
    /// Per-key algorithms, by the key's text (an API key, a bearer token,
    /// an IP, a network as `198.51.100.0/24` or `2001:db8::/48`; for a
    /// composite key, its parts joined by `|`): at most
    /// [`MAX_OVERRIDES`].
    #[serde(default)]
    pub overrides: BTreeMap<String, AnyAlgorithm>,
    /// Clients never limited by this limit: CIDRs matched on the client IP
    /// its key uses (through the trusted proxies), addresses, or exact
    /// keys as rendered (an API key, `2001:db8::/48`, `a|b`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Clients refused (403) on this limit's routes, written as `allow`.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl PolicyEntry {
    /// Whether `other` differs from this entry only in what a reload can
    /// change (the algorithm and the overrides); if not, the name of the
    /// first field that differs.
    fn unchanged_but_limits(&self, other: &PolicyEntry) -> Result<(), &'static str> {
        let checks = [
            (self.key == other.key, "key"),
            (self.routes == other.routes, "routes"),
            (self.cost == other.cost, "cost"),
            (self.count == other.count, "count"),
            (self.reset_on == other.reset_on, "reset-on"),
            (self.ban_policy() == other.ban_policy(), "ban"),
            (self.allow == other.allow, "allow"),
            (self.deny == other.deny, "deny"),
            (self.mode == other.mode, "mode"),
            (self.headers == other.headers, "headers"),
            (self.on_key_error == other.on_key_error, "on-key-error"),
            (self.tier == other.tier, "tier"),
        ];
        match checks.iter().find(|(same, _)| !same) {
            Some((_, field)) => Err(field),
            None => Ok(()),
        }
    }

    /// Why this entry, as written, could never limit anything or never
    /// admit anything, if it could: a cost of 0 (every request a peek), a
    /// cost above the capacity of its algorithm or of an override (every
    /// request refused), or an empty `count` (nothing counts).
    fn disables_itself(&self) -> Option<String> {
        if self.cost == 0 {
            return Some(
                "cost = 0 makes every request a peek, which turns the limit off; \
                 use mode = \"dry-run\" to measure without limiting"
                    .to_owned(),
            );
        }
        let capacity = |a: &AnyAlgorithm| ratelimit_core::Algorithm::limit(a);
        let too_small = std::iter::once(("the algorithm", &self.algorithm))
            .chain(self.overrides.iter().map(|(k, a)| (k.as_str(), a)))
            .find(|(_, a)| capacity(a) < self.cost);
        if let Some((what, a)) = too_small {
            let what = if what == "the algorithm" {
                what.to_owned()
            } else {
                format!("an override (key {} chars long)", what.len())
            };
            return Some(format!(
                "cost = {} is above the capacity {} of {what}: every request would be refused",
                self.cost,
                capacity(a)
            ));
        }
        if self.count.as_ref().is_some_and(Vec::is_empty) {
            return Some(
                "count = [] counts no response, which turns the limit off; \
                 leave count out to count every response"
                    .to_owned(),
            );
        }
        None
    }

    /// The overrides, their keys written as the limit's key extractor
    /// writes keys (`2001:db8::/64`, not `2001:DB8:0::/64`), or why one
    /// names a key no request can have. `client-ip` without prefix lengths
    /// is taken as v4/32, v6/64 here.
    fn canonical_overrides(&self) -> Result<BTreeMap<String, AnyAlgorithm>, String> {
        let parts: Vec<OverridePart> = self.key.0.iter().map(KeyPart::override_part).collect();
        let mut written = BTreeMap::new();
        for (text, algorithm) in &self.overrides {
            if written
                .insert(canonical(&parts, text)?, *algorithm)
                .is_some()
            {
                return Err(format!(
                    "two overrides name one key ({} characters long)",
                    text.len()
                ));
            }
        }
        Ok(written)
    }

    /// Whether this entry's layer checks `req`: one of its routes matches
    /// (a `GET` route covers `HEAD`; the path is axum's matched path when
    /// `req` has one), and its tier takes the client, as `options` tells
    /// clients apart. The layer decides so before it keys the request;
    /// tools that replay requests (`ratelimit-sim what-if`) ask it which
    /// limits saw one.
    pub fn applies_to(&self, req: &Parts, options: &PolicyOptions) -> bool {
        applies(&self.routes, self.tier, options.authenticated.as_ref(), req)
    }

    /// The entry's ban, if it has one (checked at load).
    pub fn ban_policy(&self) -> Option<BanPolicy> {
        self.checked_ban().ok().flatten()
    }

    /// The ban of `ban`, `ban-escalate`, `ban-max` and `ban-forgive`, or
    /// why it cannot be.
    fn checked_ban(&self) -> Result<Option<BanPolicy>, String> {
        let Some(duration) = self.ban else {
            if self.ban_escalate.is_some() || self.ban_max.is_some() || self.ban_forgive.is_some() {
                return Err("ban-escalate, ban-max and ban-forgive need a ban".to_owned());
            }
            return Ok(None);
        };
        let ban = BanPolicy::new(duration).map_err(|e| e.to_string())?;
        if self.ban_escalate.is_none() && self.ban_max.is_none() && self.ban_forgive.is_none() {
            return Ok(Some(ban));
        }
        let max = self.ban_max.unwrap_or(duration);
        ban.escalate(
            self.ban_escalate.unwrap_or(1.0),
            max,
            self.ban_forgive.unwrap_or_default(),
        )
        .map(Some)
        .map_err(|e| e.to_string())
    }

    /// The overrides as the live algorithm takes them.
    fn override_list(&self) -> Vec<(&str, AnyAlgorithm)> {
        self.overrides
            .iter()
            .map(|(k, a)| (k.as_str(), *a))
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Clients no limit limits (see [`PolicyEntry::allow`]).
    #[serde(default)]
    allow: Vec<String>,
    /// Clients every limit refuses on its routes.
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    limit: Vec<toml::Spanned<PolicyEntry>>,
}

/// Every limit of an app: see the [module docs](self) for the file.
#[derive(Debug, Clone)]
pub struct PolicyTable {
    entries: Vec<PolicyEntry>,
    allow: AccessList,
    deny: AccessList,
}

/// The line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The `name` of the `[[limit]]` block holding byte `offset`, if any.
fn entry_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = if text[offset..].starts_with("[[limit]]") {
        offset
    } else {
        text[..offset].rfind("[[limit]]")?
    };
    let end = text[start + 9..]
        .find("[[limit]]")
        .map_or(text.len(), |e| start + 9 + e);
    text[start..end].lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "name").then(|| v.trim().trim_matches('"').to_owned())
    })
}

impl PolicyTable {
    /// Reads a table from TOML text; `file` only names it in errors.
    pub fn from_toml(text: &str, file: Option<&Path>) -> Result<Self, PolicyError> {
        let error = |offset: Option<usize>, entry: Option<String>, message: String| PolicyError {
            file: file.map(Path::to_path_buf),
            line: offset.map(|o| line_of(text, o)),
            entry: entry.or_else(|| offset.and_then(|o| entry_at(text, o))),
            message,
        };
        let parsed: File = toml::from_str(text).map_err(|e| {
            let start = e.span().map(|s| s.start);
            error(start, None, e.message().trim().to_owned())
        })?;
        let mut entries: Vec<PolicyEntry> = Vec::with_capacity(parsed.limit.len());
        for spanned in parsed.limit {
            let at = Some(spanned.span().start);
            let mut entry = spanned.into_inner();
            let name = entry.name.clone();
            let fail = |message: String| error(at, Some(name.clone()), message);
            if entry.name.is_empty()
                || entry.name.len() > 64
                || !entry
                    .name
                    .bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"')
            {
                return Err(fail(
                    "a name is 1 to 64 visible ASCII characters, without quotes".to_owned(),
                ));
            }
            if entries.iter().any(|e| e.name == entry.name) {
                return Err(fail("the name is used twice".to_owned()));
            }
            if entry.mode == Mode::Shape && !matches!(entry.algorithm, AnyAlgorithm::LeakyBucket(_))
            {
                return Err(fail(
                    "mode \"shape\" needs a leaky-bucket algorithm".to_owned(),
                ));
            }
            if let Some(problem) = entry.disables_itself() {
                return Err(fail(problem));
            }
            entry.overrides = entry.canonical_overrides().map_err(fail)?;
            entry.checked_ban().map_err(fail)?;
            AccessList::parse(&entry.allow).map_err(fail)?;
            AccessList::parse(&entry.deny).map_err(fail)?;
            if entry.overrides.len() > MAX_OVERRIDES {
                return Err(fail(format!(
                    "{} overrides: at most {MAX_OVERRIDES}",
                    entry.overrides.len()
                )));
            }
            entries.push(entry);
        }
        if entries.len() > 64 {
            return Err(error(
                None,
                None,
                format!("{} limits: at most 64", entries.len()),
            ));
        }
        let allow = AccessList::parse(&parsed.allow).map_err(|e| error(None, None, e))?;
        let deny = AccessList::parse(&parsed.deny).map_err(|e| error(None, None, e))?;
        Ok(Self {
            entries,
            allow,
            deny,
        })
    }

    /// Reads a table from a TOML file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: Some(path.to_path_buf()),
            line: None,
            entry: None,
            message: format!("cannot read: {e}"),
        })?;
        Self::from_toml(&text, Some(path))
    }

    /// The entries, in the file's order.
    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// The entry named `name`.
    pub fn entry(&self, name: &str) -> Option<&PolicyEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Adds a layer for every entry to `router` (as route layers, so they
    /// see the matched path; add every route first), the first entry
    /// outermost, and returns the router with a [`PolicyHandle`] that
    /// changes the limits while they run.
    ///
    /// `store` makes each entry's store from its name and its
    /// [`LiveAlgorithm`]: `MemoryStore::new(live.clone())` keeps the limits
    /// live; a store built from `live.get()` (ratelimit-redis's
    /// `StoreSettings::build`) keeps the settings it was built with. A
    /// limit's `ban` is the store's: give the store
    /// [`entry(name)`](Self::entry)'s [`ban_policy`](PolicyEntry::ban_policy)
    /// (`MemoryStoreBuilder::ban`, ratelimit-redis's `StoreSettings::build_live_with_ban`), as
    /// [`apply_in_memory`](Self::apply_in_memory) does.
    pub fn apply<St, E>(
        &self,
        mut router: Router,
        options: &PolicyOptions,
        mut store: impl FnMut(&str, &LiveAlgorithm) -> Result<St, E>,
    ) -> Result<(Router, PolicyHandle), PolicyError>
    where
        St: Store<PolicyKey, CheckFuture: Unpin, RefundFuture: Unpin>,
        E: fmt::Display,
    {
        let mut layers = Vec::with_capacity(self.entries.len());
        let mut live = Vec::with_capacity(self.entries.len());
        let mut handles = Vec::with_capacity(self.entries.len());
        let clock = options
            .clock
            .clone()
            .unwrap_or_else(crate::clock::default_clock);
        let runtime = Arc::new(RuntimeLists::default());
        for entry in &self.entries {
            let fail = |message: String| PolicyError {
                file: None,
                line: None,
                entry: Some(entry.name.clone()),
                message,
            };
            let algorithm = LiveAlgorithm::new(entry.algorithm);
            algorithm
                .replace(entry.algorithm, &entry.override_list())
                .map_err(|e| fail(e.to_string()))?;
            let store = Arc::new(store(&entry.name, &algorithm).map_err(|e| fail(e.to_string()))?);
            handles.push(LimitHandle {
                name: entry.name.clone(),
                live: algorithm.clone(),
                store: BoxStore::new(Arc::clone(&store)),
                clock: Arc::clone(&clock),
                parts: entry.key.0.iter().map(|p| text_part(p, options)).collect(),
            });
            live.push((entry.clone(), algorithm));
            let name: &'static str = Box::leak(entry.name.clone().into_boxed_str());
            let allow = AccessList::parse(&entry.allow)
                .map_err(fail)?
                .and(&self.allow);
            let deny = AccessList::parse(&entry.deny)
                .map_err(fail)?
                .and(&self.deny);
            let extractor = PolicyExtractor {
                name,
                lists: !(allow.is_empty() && deny.is_empty()),
                allow,
                deny,
                ip: ip_source(&entry.key, options),
                runtime: Arc::clone(&runtime),
                clock: Arc::clone(&clock),
                tier: entry.tier,
                authenticated: options.authenticated.clone(),
                routes: entry.routes.clone().into(),
                parts: entry
                    .key
                    .0
                    .iter()
                    .map(|p| Part::new(p, options))
                    .collect::<Result<_, _>>()
                    .map_err(fail)?,
            };
            let skip = |_: &Parts, key: &PolicyKey| match key {
                PolicyKey::Skip => Selection::NONE,
                _ => Selection::ALL,
            };
            let mut builder = RateLimitLayer::builder(extractor)
                .limit_shared(entry.name.clone(), store)
                .select(skip)
                .mode(entry.mode)
                .headers(entry.headers)
                .on_key_error(entry.on_key_error);
            if entry.cost != 1 {
                builder = builder.cost(crate::policy::FixedCost(entry.cost));
            }
            if let Some(count) = entry.count.clone() {
                builder = builder
                    .count_if(move |res: &http::response::Parts| count.contains(&res.status));
            }
            if let Some(reset_on) = entry.reset_on.clone().filter(|r| !r.is_empty()) {
                builder = builder
                    .reset_if(move |res: &http::response::Parts| reset_on.contains(&res.status));
            }
            builder = builder.shared_clock(Arc::clone(&clock));
            layers.push(builder.build().map_err(|e| fail(e.to_string()))?);
        }
        for layer in layers.into_iter().rev() {
            router = router.route_layer(layer);
        }
        let handle = PolicyHandle {
            limits: live.into(),
            handles: handles.into(),
            runtime,
            clock,
            reloads: AtomicU64::new(0),
        };
        Ok((router, handle))
    }

    /// [`apply`](Self::apply) with every limit in memory, each holding at
    /// most `max_keys` keys (see
    /// [`MemoryStoreBuilder::max_keys`](ratelimit_core::MemoryStoreBuilder::max_keys)),
    /// live.
    pub fn apply_in_memory(
        &self,
        router: Router,
        options: &PolicyOptions,
        max_keys: Option<usize>,
    ) -> Result<(Router, PolicyHandle), PolicyError> {
        self.apply(router, options, |name, live| {
            Ok::<_, std::convert::Infallible>(
                MemoryStore::<LiveAlgorithm, PolicyKey>::builder(live.clone())
                    .max_keys(max_keys)
                    .ban(self.entry(name).and_then(PolicyEntry::ban_policy))
                    .build(),
            )
        })
    }
}

/// Changes a table's limits while they run: from another table (a
/// reload), or one key at a time (overrides, through
/// [`limit`](Self::limit)).
///
/// What a reload changed of one limit: its algorithm (`from` and `to`
/// are equal when only overrides changed) and its overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitChange {
    /// The limit's name.
    pub limit: String,
    /// Its algorithm before the reload.
    pub from: AnyAlgorithm,
    /// Its algorithm after.
    pub to: AnyAlgorithm,
    /// How its overrides changed: `"same"`, or `"N -> M"` (counts; the
    /// keys are not named, as they may be API keys).
    pub overrides: String,
}

impl LimitChange {
    /// The change from what `live` runs to `new`, if any.
    fn between(new: &PolicyEntry, live: &LiveAlgorithm) -> Option<Self> {
        // Compared by their spec form: a live algorithm may hold the same
        // settings in a wider state.
        let same = |a: &AnyAlgorithm, b: &AnyAlgorithm| a.to_string() == b.to_string();
        let from = live.get();
        let same_overrides = live.overrides() == new.overrides.len()
            && new
                .overrides
                .iter()
                .all(|(k, a)| live.override_of(k.as_str()).is_some_and(|o| same(&o, a)));
        if same(&from, &new.algorithm) && same_overrides {
            return None;
        }
        let overrides = if same_overrides {
            "same".to_owned()
        } else {
            format!("{} -> {}", live.overrides(), new.overrides.len())
        };
        Some(Self {
            limit: new.name.clone(),
            from,
            to: new.algorithm,
            overrides,
        })
    }
}

/// A reload changes each entry's algorithm and overrides (see
/// [`LiveAlgorithm`] for what each key keeps: a change frees nothing; an
/// entry whose algorithm and overrides are unchanged is not touched);
/// anything else (an entry
/// added, removed, renamed or moved, a key, routes, cost, counted
/// statuses, mode, headers) needs a restart, and a table that changes it
/// is rejected whole, naming the entry (the one added or removed) and the
/// field: the running limits stay as they were, and
/// [`watch`](Self::watch) logs why.
pub struct PolicyHandle {
    limits: Box<[(PolicyEntry, LiveAlgorithm)]>,
    handles: Box<[LimitHandle]>,
    runtime: Arc<RuntimeLists>,
    clock: Arc<dyn Clock>,
    reloads: AtomicU64,
}

impl fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyHandle")
            .field("limits", &self.limits)
            .field("handles", &self.handles)
            .field("reloads", &self.reloads)
            .finish_non_exhaustive()
    }
}

impl PolicyHandle {
    /// Adds `entry` (a CIDR, an address or a key, as in the file) to the
    /// allow or deny list of every limit for `ttl`, or renews it; at most
    /// [`MAX_RUNTIME_ENTRIES`] per list. Kept in this instance's memory
    /// (not shared through Redis), and across reloads.
    pub fn add_to_list(
        &self,
        kind: ListKind,
        entry: &str,
        ttl: std::time::Duration,
    ) -> Result<(), String> {
        let now = self.clock.now();
        let ttl = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        self.runtime
            .add(kind, entry.trim(), now.saturating_add(ttl), now)
    }

    /// Removes `entry` added by [`add_to_list`](Self::add_to_list);
    /// whether it was there.
    pub fn remove_from_list(&self, kind: ListKind, entry: &str) -> bool {
        self.runtime.remove(kind, entry.trim())
    }

    /// The limit named `name`: check, peek, refund, reset, ban and unban
    /// a key in the store its layer uses.
    pub fn get(&self, name: &str) -> Option<&LimitHandle> {
        self.handles.iter().find(|h| h.name == name)
    }

    /// Every limit, in the file's order.
    pub fn handles(&self) -> &[LimitHandle] {
        &self.handles
    }

    /// The entry of the limit `name` as last loaded.
    pub fn entry(&self, name: &str) -> Option<&PolicyEntry> {
        self.limits.iter().map(|(e, _)| e).find(|e| e.name == name)
    }

    /// The live algorithm of the entry `name` (to read it, or to add and
    /// remove per-key overrides).
    pub fn limit(&self, name: &str) -> Option<&LiveAlgorithm> {
        self.limits
            .iter()
            .find(|(e, _)| e.name == name)
            .map(|(_, a)| a)
    }

    /// How many reloads have been applied.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Applies `table`'s algorithms and overrides, all or nothing; returns
    /// what changed (nothing, for a table equal to the running one).
    ///
    /// With feature `metrics`, counts `ratelimit_reloads_total` by
    /// `outcome`: `applied`, `unchanged` or `rejected`.
    pub fn reload(&self, table: &PolicyTable) -> Result<Vec<LimitChange>, PolicyError> {
        let result = self.try_reload(table);
        #[cfg(feature = "metrics")]
        {
            let outcome = match &result {
                Ok(changes) if changes.is_empty() => "unchanged",
                Ok(_) => "applied",
                Err(_) => "rejected",
            };
            metrics::counter!("ratelimit_reloads_total", "outcome" => outcome).increment(1);
        }
        result
    }

    fn try_reload(&self, table: &PolicyTable) -> Result<Vec<LimitChange>, PolicyError> {
        let fail = |entry: Option<&str>, message: String| PolicyError {
            file: None,
            line: None,
            entry: entry.map(str::to_owned),
            message,
        };
        let runs = |name: &str| self.limits.iter().any(|(e, _)| e.name == name);
        if let Some(added) = table.entries.iter().find(|e| !runs(&e.name)) {
            if table.entries.len() > self.limits.len() {
                return Err(fail(
                    Some(&added.name),
                    "added: adding a limit needs a restart".to_owned(),
                ));
            }
        }
        let kept = |name: &str| table.entries.iter().any(|e| e.name == name);
        if let Some((removed, _)) = self.limits.iter().find(|(e, _)| !kept(&e.name)) {
            if table.entries.len() < self.limits.len() {
                return Err(fail(
                    Some(&removed.name),
                    "removed: removing a limit needs a restart".to_owned(),
                ));
            }
        }
        if table.entries.len() != self.limits.len() {
            return Err(fail(
                None,
                format!(
                    "{} limits where {} run: adding or removing a limit needs a restart",
                    table.entries.len(),
                    self.limits.len()
                ),
            ));
        }
        for (new, (old, _)) in table.entries.iter().zip(self.limits.iter()) {
            if new.name != old.name {
                return Err(fail(
                    Some(&new.name),
                    format!(
                        "where {:?} runs: renaming or moving a limit needs a restart",
                        old.name
                    ),
                ));
            }
            new.unchanged_but_limits(old).map_err(|field| {
                fail(
                    Some(&new.name),
                    format!("changing its {field} needs a restart"),
                )
            })?;
        }
        let changes: Vec<LimitChange> = table
            .entries
            .iter()
            .zip(self.limits.iter())
            .filter_map(|(new, (_, live))| LimitChange::between(new, live))
            .collect();
        for (new, (_, live)) in table.entries.iter().zip(self.limits.iter()) {
            live.replace(new.algorithm, &new.override_list())
                .map_err(|e| fail(Some(&new.name), e.to_string()))?;
        }
        self.reloads.fetch_add(1, Ordering::Relaxed);
        Ok(changes)
    }

    /// Reads `path` and applies it ([`reload`](Self::reload)); errors
    /// name the file.
    pub fn reload_file(&self, path: &Path) -> Result<Vec<LimitChange>, PolicyError> {
        let table = match PolicyTable::load(path) {
            Ok(table) => table,
            Err(e) => {
                #[cfg(feature = "metrics")]
                metrics::counter!("ratelimit_reloads_total", "outcome" => "rejected").increment(1);
                return Err(e);
            }
        };
        self.reload(&table).map_err(|mut e| {
            e.file = Some(path.to_path_buf());
            e
        })
    }

    /// Reloads `path` on `SIGHUP` (Unix) and whenever its contents change
    /// (read every `poll`; a change is applied once the contents have
    /// held still for one more read, so an editor's partial write is not
    /// taken). Every reload is logged: `info` when applied, `error` with
    /// the reason when rejected (the running limits stay). The task ends
    /// when every other `Arc` of the handle is dropped; it needs a tokio
    /// runtime.
    pub fn watch(self: &Arc<Self>, path: impl Into<PathBuf>, poll: std::time::Duration) {
        let (handle, path) = (Arc::downgrade(self), path.into());
        #[cfg(unix)]
        let mut hangup = {
            use tokio::signal::unix::{signal, SignalKind};
            signal(SignalKind::hangup())
                .map_err(|e| {
                    tracing::error!(error = %e, "no SIGHUP handler: reloading on file change only");
                })
                .ok()
        };
        tokio::spawn(async move {
            let mut seen = std::fs::read(&path).ok();
            let mut pending: Option<Option<Vec<u8>>> = None;
            loop {
                #[cfg(unix)]
                let hup = async {
                    match hangup.as_mut() {
                        Some(h) => h.recv().await,
                        None => std::future::pending().await,
                    }
                };
                #[cfg(not(unix))]
                let hup = std::future::pending::<Option<()>>();
                let signalled = tokio::select! {
                    _ = hup => true,
                    _ = tokio::time::sleep(poll) => false,
                };
                let Some(handle) = handle.upgrade() else {
                    return;
                };
                let now = std::fs::read(&path).ok();
                let apply = if signalled {
                    true
                } else if now == seen {
                    pending = None;
                    false
                } else if pending.as_ref() == Some(&now) {
                    true
                } else {
                    pending = Some(now.clone());
                    false
                };
                if !apply {
                    continue;
                }
                seen = now;
                pending = None;
                let why = if signalled { "SIGHUP" } else { "file changed" };
                match handle.reload_file(&path) {
                    Ok(changes) if changes.is_empty() => {
                        tracing::info!(file = %path.display(), why, "rate limits reloaded: no change");
                    }
                    Ok(changes) => {
                        for c in &changes {
                            tracing::info!(limit = %c.limit, from = %c.from, to = %c.to, overrides = %c.overrides, "rate limit changed");
                        }
                        tracing::info!(file = %path.display(), why, changed = changes.len(), "rate limits reloaded");
                    }
                    Err(e) => tracing::error!(
                        error = %e,
                        why,
                        "rate-limit reload rejected; the running limits stay"
                    ),
                }
            }
        });
    }
}

/// A key the app defines (`key = "app:NAME"`): the key of a request, or
/// why there is none (as a [`KeyExtractor`] answers).
pub type AppKey = Arc<dyn Fn(&Parts) -> Result<PolicyKey, KeyError> + Send + Sync>;

/// Whether a request comes from an authenticated client.
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
fn extract_parts(parts: &[Part], req: &Parts) -> Result<PolicyKey, KeyError> {
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
fn has_credentials(req: &Parts) -> bool {
    req.headers.contains_key(http::header::AUTHORIZATION) || req.headers.contains_key("x-api-key")
}

/// What the table's layers need from the app.
#[derive(Clone, Default)]
pub struct PolicyOptions {
    /// Tells authenticated clients (tier `authenticated`) from anonymous
    /// ones (tier `anonymous`): say, an API key the app knows. Default: a
    /// request with an `Authorization` or `X-API-Key` header.
    pub authenticated: Option<Authenticated>,
    /// The keys named `app:NAME` in the table, by `NAME` (the user of a
    /// session, an API key the app checks...).
    pub app_keys: BTreeMap<String, AppKey>,
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
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

/// One part of an extractor.
enum Part {
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
    fn new(part: &KeyPart, options: &PolicyOptions) -> Result<Self, String> {
        let client_ip = &options.client_ip;
        Ok(match part {
            KeyPart::PeerIp(prefixes) => {
                Self::PeerIp(PeerIp::new().prefixes(prefixes.unwrap_or_default()))
            }
            KeyPart::ClientIp(prefixes) => {
                let x = client_ip.clone().unwrap_or_else(|| ClientIp::trusting([]));
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
        })
    }

    fn extract(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
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
fn applies(
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
fn text_part(part: &KeyPart, options: &PolicyOptions) -> TextPart {
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
        KeyPart::ApiKey | KeyPart::Bearer => TextPart::Text { secret: true },
        KeyPart::Global => TextPart::Global,
        KeyPart::Route => TextPart::Route,
        KeyPart::App(_) => TextPart::App,
    }
}

/// Where the lists of a limit keyed on `key` read the client IP: its
/// first IP part's source, else the client through the trusted proxies.
fn ip_source(key: &KeySpec, options: &PolicyOptions) -> IpSource {
    let client = || {
        IpSource::Client(
            options
                .client_ip
                .clone()
                .unwrap_or_else(|| ClientIp::trusting([])),
        )
    };
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
struct PolicyExtractor {
    /// The limit's name (for metrics).
    name: &'static str,
    /// Whether it has an allow or deny entry.
    lists: bool,
    allow: AccessList,
    deny: AccessList,
    ip: IpSource,
    /// The entries added at run time, on every limit.
    runtime: Arc<RuntimeLists>,
    clock: Arc<dyn Clock>,
    tier: Tier,
    authenticated: Option<Authenticated>,
    routes: Box<[RouteSpec]>,
    parts: Box<[Part]>,
}

impl KeyExtractor for PolicyExtractor {
    type Key = PolicyKey;

    fn extract(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
        if !applies(&self.routes, self.tier, self.authenticated.as_ref(), req) {
            return Ok(PolicyKey::Skip);
        }
        let runtime = self.runtime.is_set();
        if !self.lists && !runtime {
            return self.key(req);
        }
        let ip = self.ip.addr(req);
        let now = if runtime { self.clock.now() } else { 0 };
        let listed = |kind: ListKind, list: &AccessList, key: Option<&str>| {
            let on_runtime =
                || runtime && self.runtime.has(kind, ip, &|| key.map(str::to_owned), now);
            match key {
                None => list.has_ip(ip) || on_runtime(),
                Some(k) => list.has_key(k) || on_runtime(),
            }
        };
        if listed(ListKind::Deny, &self.deny, None) {
            crate::observe::denied_by_list(self.name);
            return Err(KeyError::denied("client IP"));
        }
        if listed(ListKind::Allow, &self.allow, None) {
            crate::observe::allowed_by_list(self.name);
            return Ok(PolicyKey::Skip);
        }
        let key = self.key(req)?;
        let text = key.to_string();
        if listed(ListKind::Deny, &self.deny, Some(&text)) {
            crate::observe::denied_by_list(self.name);
            return Err(KeyError::denied("client key"));
        }
        if listed(ListKind::Allow, &self.allow, Some(&text)) {
            crate::observe::allowed_by_list(self.name);
            return Ok(PolicyKey::Skip);
        }
        Ok(key)
    }
}

impl PolicyExtractor {
    /// The request's key, lists aside.
    fn key(&self, req: &Parts) -> Result<PolicyKey, KeyError> {
        extract_parts(&self.parts, req)
    }
}

/// The key of a table's limit: whichever its `key` names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyKey {
    /// The request is on a route the entry does not list (never stored).
    Skip,
    /// A client's IP (or prefix).
    Ip(IpKey),
    /// A header's value, an API key or a bearer token.
    Text(HeaderKey),
    /// Everyone.
    Global,
    /// A route.
    Route(RouteKey),
    /// Several parts.
    Composite(Box<[PolicyKey]>),
}

impl fmt::Display for PolicyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Skip => f.write_str("-"),
            Self::Ip(k) => k.fmt(f),
            Self::Text(k) => k.fmt(f),
            Self::Global => f.write_str("global"),
            Self::Route(k) => k.fmt(f),
            Self::Composite(parts) => {
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str("|")?;
                    }
                    p.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

impl StableKey for PolicyKey {
    fn write_stable(&self, h: &mut StableHasher) {
        use std::fmt::Write;
        // `StableHasher`'s `fmt::Write` never fails.
        let _ = write!(h, "{self}");
    }

    /// An API key, a bearer token, a secret header, or a composite with
    /// one of them.
    fn is_secret(&self) -> bool {
        match self {
            Self::Text(k) => k.is_secret(),
            Self::Composite(parts) => parts.iter().any(StableKey::is_secret),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key `spec` gives `req`.
    fn key(spec: &str, req: &Parts) -> PolicyKey {
        let KeySpec(parts) = spec.parse().unwrap();
        let options = PolicyOptions::default();
        let parts: Vec<Part> = parts
            .iter()
            .map(|p| Part::new(p, &options).unwrap())
            .collect();
        match parts.as_slice() {
            [one] => one.extract(req).unwrap(),
            many => PolicyKey::Composite(many.iter().map(|p| p.extract(req).unwrap()).collect()),
        }
    }

    #[test]
    fn entries_say_what_they_check_and_key() {
        let table = PolicyTable::from_toml(
            "[[limit]]\nname = \"items\"\nalgorithm = \"gcra 2/1m\"\nkey = \"header:x-tenant+route\"\n\
             routes = [\"GET /items\"]\ntier = \"anonymous\"\n",
            None,
        )
        .unwrap();
        let entry = &table.entries()[0];
        let req = |method: &str, auth: bool| {
            let mut b = http::Request::builder()
                .method(method)
                .uri("/items")
                .header("x-tenant", "acme");
            if auth {
                b = b.header("authorization", "Bearer t");
            }
            b.body(()).unwrap().into_parts().0
        };
        let options = PolicyOptions::default();
        assert!(entry.applies_to(&req("GET", false), &options));
        assert!(
            entry.applies_to(&req("HEAD", false), &options),
            "HEAD under GET"
        );
        assert!(!entry.applies_to(&req("POST", false), &options));
        assert!(!entry.applies_to(&req("GET", true), &options), "tier");
        let key = entry.key.extractor(&options).unwrap();
        assert_eq!(
            key(&req("GET", false)).unwrap().to_string(),
            "acme|GET /items"
        );
        let app: KeySpec = "app:user".parse().unwrap();
        let Err(e) = app.extractor(&options) else {
            panic!("app:user is not defined")
        };
        assert!(e.contains("app:user"), "{e}");
    }

    #[test]
    fn credentials_make_secret_keys() {
        let req = http::Request::builder()
            .header("x-api-key", "k-1")
            .header("authorization", "Bearer t")
            .header("x-tenant", "acme")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        for (spec, secret) in [
            ("api-key", true),
            ("bearer", true),
            ("header:x-tenant", false),
            ("secret-header:x-tenant", true),
            ("header:x-api-key", true),
            ("route", false),
            ("route+api-key", true),
            ("route+header:x-tenant", false),
        ] {
            assert_eq!(key(spec, &req).is_secret(), secret, "{spec}");
        }
        assert_eq!(key("secret-header:x-tenant", &req).to_string(), "acme");
        assert!("secret-header:bad name".parse::<KeySpec>().is_err());
    }
}
