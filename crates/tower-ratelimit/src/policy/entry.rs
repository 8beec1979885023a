//! One `[[limit]]` of the file (`PolicyEntry`): its fields, how they are read, and the checks that refuse a limit that could never limit.

use super::extractor::{applies, PolicyOptions};
use super::key::{KeyPart, KeySpec};
use super::route::RouteSpec;
use super::settle::Estimate;
use super::tier::Tier;
use crate::override_key::{canonical, OverridePart};
use crate::response::Headers;
use crate::strategy::{Cost, FixedCost, KeyErrorPolicy, Mode};
use crate::LayerBuildError;
use http::request::Parts;
use http::StatusCode;
use ratelimit_core::{AnyAlgorithm, BanPolicy};
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::str::FromStr;

pub(super) fn parsed<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = String>,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

pub(super) fn parsed_list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = String>,
{
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .collect()
}

/// `routes`: a list of at least one route, as `routes = []` reads as "no
/// route" to a reader but the empty list is the default, every route.
fn routes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RouteSpec>, D::Error> {
    let routes: Vec<RouteSpec> = parsed_list(d)?;
    if routes.is_empty() {
        return Err(serde::de::Error::custom(
            "routes = [] would match no route: leave routes out to limit every route, \
             or list at least one",
        ));
    }
    Ok(routes)
}

pub(super) fn statuses<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<StatusCode>>, D::Error> {
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

pub(super) fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    named(d, "mode")
}

pub(super) fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Headers, D::Error> {
    named(d, "headers")
}

pub(super) fn key_error<'de, D: Deserializer<'de>>(d: D) -> Result<KeyErrorPolicy, D::Error> {
    named(d, "on-key-error")
}

/// A `T` read from its name (its serde derive), refused as `bad {what}
/// "NAME": expected A, B or C`.
fn named<'de, D, T>(d: D, what: &str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let name = String::deserialize(d)?;
    T::deserialize(name.as_str().into_deserializer())
        .map_err(|e: Unnamed| serde::de::Error::custom(format!("bad {what} {name:?}: {}", e.0)))
}

/// Why a name is not one of a `T`'s: the names it has.
#[derive(Debug)]
struct Unnamed(String);

impl serde::de::Error for Unnamed {
    fn custom<M: std::fmt::Display>(message: M) -> Self {
        Self(message.to_string())
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        let list = match expected {
            [] => String::new(),
            [one] => (*one).to_owned(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        };
        Self(format!("expected {list}"))
    }
}

impl std::fmt::Display for Unnamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unnamed {}

pub(super) fn duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let s = String::deserialize(d)?;
    ratelimit_core::plumbing::parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn one() -> u64 {
    1
}

/// One named limit of a [`PolicyTable`](super::PolicyTable).
///
/// ```
/// use tower_ratelimit::policy::PolicyTable;
///
/// let text = r#"
/// [[limit]]
/// name = "api"
/// algorithm = "gcra 100/1m"
/// key = "peer-ip"
/// routes = ["GET /items"]
/// "#;
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let entry = table.entry("api").unwrap(); // a PolicyEntry
/// assert_eq!(entry.algorithm.to_string(), "gcra 100/1m");
/// ```
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
    /// The routes it applies to; left out: every route (`routes = []`,
    /// which would match none, is refused).
    #[serde(default, deserialize_with = "routes")]
    pub routes: Vec<RouteSpec>,
    /// The cost of each request (default 1).
    #[serde(default = "one")]
    pub cost: u64,
    /// What a settled limit reserves at admission (default 1): a number
    /// (at least 1), or `"header:NAME"` (needs `max-cost`); needs
    /// `cost-from`.
    #[serde(default, deserialize_with = "super::settle::estimate")]
    pub estimate: Option<super::settle::Estimate>,
    /// With `estimate = "header:NAME"`, the most one call may use: the
    /// header's value is capped at it, and a call without a positive
    /// decimal in the header reserves it.
    #[serde(default)]
    pub max_cost: Option<u64>,
    /// Where the actual cost is read after the response, settling the
    /// estimate to it ([`CostFrom`](crate::CostFrom)): `None`, the cost is final.
    #[serde(default, deserialize_with = "super::settle::cost_from")]
    pub cost_from: Option<crate::CostFrom>,
    /// Pace bodies instead of refusing requests: `"response"`,
    /// `"request"` or `"both"` (see [`pace`](crate::pace)).
    #[serde(default, deserialize_with = "super::pace_fields::pace")]
    pub pace: Option<crate::pace::Paced>,
    /// Bytes of each paced body let through unpaced first (`"64KiB"`, or
    /// a number of bytes; default 0).
    #[serde(default, deserialize_with = "super::pace_fields::bytes")]
    pub pace_after: Option<u64>,
    /// The largest piece a paced body charges at once (default 16 KiB).
    #[serde(default, deserialize_with = "super::pace_fields::bytes")]
    pub pace_piece: Option<u64>,
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
    /// Allows a ban on a key that is not one client's (default false): a
    /// key many clients share (`global`, `route`, a header's value), or a
    /// credential counted on failures a client can cause without it (see
    /// the [module docs](super)). Without it such a ban is refused at load.
    #[serde(default)]
    pub ban_any_key: bool,
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
    /// The plan whose members' requests it counts (a
    /// [`Plan`](super::Plan)'s name), or `"none"`: the requests in no plan;
    /// left out: every request. A request of another plan passes the
    /// limit untouched (not a key error).
    #[serde(default)]
    pub plan: Option<String>,
    /// Per-key algorithms, by the key's text (an API key, a bearer token,
    /// an IP, a network as `198.51.100.0/24` or `2001:db8::/48`; for a
    /// composite key, its parts joined by `|`): at most
    /// [`MAX_OVERRIDES`](ratelimit_core::algorithm::MAX_OVERRIDES).
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
    pub(super) fn unchanged_but_limits(&self, other: &PolicyEntry) -> Result<(), &'static str> {
        let checks = [
            (self.key == other.key, "key"),
            (self.routes == other.routes, "routes"),
            (self.cost == other.cost, "cost"),
            (self.estimate == other.estimate, "estimate"),
            (self.max_cost == other.max_cost, "max-cost"),
            (self.cost_from == other.cost_from, "cost-from"),
            (self.pace == other.pace, "pace"),
            (self.pace_after == other.pace_after, "pace-after"),
            (self.pace_piece == other.pace_piece, "pace-piece"),
            (self.count == other.count, "count"),
            (self.reset_on == other.reset_on, "reset-on"),
            (self.ban_policy() == other.ban_policy(), "ban"),
            (self.ban_any_key == other.ban_any_key, "ban-any-key"),
            (self.allow == other.allow, "allow"),
            (self.deny == other.deny, "deny"),
            (self.mode == other.mode, "mode"),
            (self.headers == other.headers, "headers"),
            (self.on_key_error == other.on_key_error, "on-key-error"),
            (self.tier == other.tier, "tier"),
            (self.plan == other.plan, "plan"),
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
    pub(super) fn disables_itself(&self) -> Option<String> {
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
    pub(super) fn canonical_overrides(&self) -> Result<BTreeMap<String, AnyAlgorithm>, String> {
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
    pub(super) fn checked_ban(&self) -> Result<Option<BanPolicy>, String> {
        let Some(duration) = self.ban else {
            if self.ban_escalate.is_some()
                || self.ban_max.is_some()
                || self.ban_forgive.is_some()
                || self.ban_any_key
            {
                return Err(
                    "ban-escalate, ban-max, ban-forgive and ban-any-key need a ban".to_owned(),
                );
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
    pub(super) fn override_list(&self) -> Vec<(&str, AnyAlgorithm)> {
        self.overrides
            .iter()
            .map(|(k, a)| (k.as_str(), *a))
            .collect()
    }
}

impl PolicyEntry {
    /// Why the entry's `estimate`, `max-cost` and `cost-from` cannot work
    /// together with its `cost`, if they cannot (see
    /// [`Estimate::checked`]): an estimate without a `cost-from` (nothing
    /// would settle it: write `cost`), or with a `cost` (the estimate is
    /// the cost reserved).
    pub(super) fn checked_settle(&self) -> Result<(), String> {
        if self.estimate.is_some() && self.cost_from.is_none() {
            return Err("estimate needs cost-from (a final cost is written cost = N)".to_owned());
        }
        if self.estimate.is_some() && self.cost != 1 {
            return Err(
                "cost and estimate both set: a settled limit's cost is its estimate".to_owned(),
            );
        }
        let capacity = ratelimit_core::Algorithm::limit(&self.algorithm);
        Estimate::checked(self.estimate.as_ref(), self.max_cost, capacity)
    }

    /// The cost the entry's layer reserves: its estimate, or its cost.
    pub(super) fn reserved_cost(&self) -> Result<Option<Box<dyn Cost>>, LayerBuildError> {
        match &self.estimate {
            Some(estimate) => estimate.cost(self.max_cost).map(Some),
            None if self.cost == 1 => Ok(None),
            None => Ok(Some(Box::new(FixedCost::new(self.cost)?))),
        }
    }
}
