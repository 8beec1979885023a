//! A policy table: every limit of an app as data, read from a TOML file and
//! turned into layers of an axum [`Router`] by one call (feature `table`).
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
//! Plans sort clients before the limits: a `[[plan]]` lists its members'
//! keys, and `plan` scopes a limit to them (see [`Plan`]).
//!
//! ```toml
//! [[plan]]
//! name = "pro"
//! key = "api-key"                   # what tells a member, as a limit's key
//! keys-file = "pro-keys.txt"        # and/or keys-env = "VAR", keys-app = "NAME", shared = true
//!
//! [[limit]]
//! name = "pro-requests"
//! plan = "pro"                      # only pro members' requests; "none": requests in no plan
//! algorithm = "gcra 500/1m"
//! key = "api-key"
//! ```
//!
//! A request's plan is found once per request, in an in-memory snapshot
//! of the lists (read at load and at each reload, all or nothing) and the
//! keys moved at run time ([`PlanDirectory::move_to_plan`]); a request of
//! another plan passes a scoped limit untouched, never a key error. A key
//! listed in two plans, an unknown plan on a limit, a plan without key or
//! source, an unreadable keys file and an unset variable are refused,
//! naming the file, the line and the plan; a listed key is never shown.
//! With feature `metrics`, `ratelimit_plan_requests_total{plan}` counts
//! each plan's requests (`none`: no plan).
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
//! A ban holds one client: a client's failures must not ban another. So
//! `ban` is refused at load, naming the limit, on a key that is not one
//! client's: `global`, `route`, a `header:NAME` (any client can send any
//! value), or a composite of them (six failed logins from one address
//! would ban every client); and on a credential (`api-key`, `bearer`,
//! `secret-header:NAME`) counted on failures (`count` absent, or listing
//! a status of 400 or above), since any client can send a credential,
//! valid or not, and fail with it, banning its holder. A key with a
//! `peer-ip`, `client-ip` (at any prefix lengths) or `app:NAME` part is
//! one client's (an app key is taken as the app defines it: a checked
//! user or API key); a credential counted only on successes
//! (`count = [200]`) can be banned too. To ban such a key on purpose (a
//! shared key's ban stops every client), write `ban-any-key = true`.
//!
//! A limit that could never limit is refused at load: `cost = 0` (every
//! request a peek), a cost above the capacity of the algorithm or of an
//! override (every request refused), and `count = []` (nothing counts).
//! To watch a limit without enforcing it, use `mode = "dry-run"`.
//!
//! A cost known only after the response (tokens an LLM generated) is
//! reserved at admission and settled afterwards: `cost-from` says where the
//! actual cost is read ([`CostFrom`](crate::CostFrom):
//! `"response-header:x-tokens-used"`, `"extension"`, `"reported"`,
//! `"body-bytes"`, `"trailer:NAME"`), and `estimate` what is reserved
//! (default 1; a number, or `"header:x-max-tokens"` with `max-cost = N`,
//! the most one call may use: the request header's positive decimal capped
//! at `N`, and `N` without one; see [`Estimate`]). Settling up charges the
//! rest unconditionally (the key may go into debt, and is denied until it
//! is repaid); settling down refunds. `estimate` without `cost-from`, both
//! `cost` and `estimate`, an estimate of 0 or above the capacity, a header
//! estimate without `max-cost`, and a `max-cost` of 0, above the capacity
//! or without a header estimate are refused at load. When any limit of a
//! table settles, every outer limit gives its cost back when an inner one
//! refuses the request, so a request refused by one limit takes nothing
//! from the others.
//!
//! ```toml
//! [[limit]]
//! name = "tokens"
//! algorithm = "fixed-window 100000/1d"
//! key = "api-key"
//! estimate = "header:x-max-tokens"
//! max-cost = 40000
//! cost-from = "response-header:x-tokens-used"
//! ```
//!
//! A limit can pace bodies instead of refusing requests, as nginx's
//! `limit_rate` does: `pace = "response"` (downloads), `"request"`
//! (uploads) or `"both"` makes the entry a [`PaceLayer`](crate::pace::PaceLayer),
//! whose bodies are yielded no faster than the algorithm's rate per key,
//! with its burst, each piece's cost its bytes. `pace-after` lets each
//! body's first bytes through unpaced (`"64KiB"`, `"1MiB"`, or bytes),
//! `pace-piece` is the largest piece charged at once (default 16 KiB). The
//! algorithm must have a steady rate (`gcra` or `token-bucket`, overrides
//! too); a `pace-piece` of 0, pace settings without `pace`, and the fields
//! of limits that refuse (`mode`, `cost`, `estimate`, `cost-from`,
//! `count`, `reset-on`, `ban`) are refused at load. A paced limit sends no
//! `RateLimit` fields; its keys, routes, tiers, lists and `on-key-error`
//! are as other limits'.
//!
//! ```toml
//! [[limit]]
//! name = "download"
//! algorithm = "token-bucket 65536 refill 262144/1s"  # 256 KiB/s, 64 KiB burst
//! key = "client-ip"
//! routes = ["GET /download"]
//! pace = "response"
//! pace-after = "0B"
//! ```
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
//! use ratelimit_core::MemoryStore;
//! use tower_ratelimit::policy::{PolicyKey, PolicyOptions, PolicyTable, StoreSpec};
//!
//! let table = PolicyTable::from_toml(
//!     "[[limit]]\nname = \"login\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [\"POST /login\"]\n",
//!     None,
//! )?;
//! let router = Router::new().route("/login", post(|| async { "ok" }));
//! let (router, handle) = table.apply(router, &PolicyOptions::default(), |spec: &StoreSpec| {
//!     MemoryStore::<_, PolicyKey>::builder(spec.live().clone()).ban(spec.ban()).build()
//! })?;
//! # let _ = (router, handle);
//! # Ok::<(), tower_ratelimit::policy::PolicyError>(())
//! ```
//!
//! [`Router`]: axum::Router
//! [`LiveAlgorithm`]: ratelimit_core::LiveAlgorithm

mod apply;
mod ban_key;
mod digest_overrides;
mod entry;
mod error;
mod extractor;
pub(crate) mod key;
mod load;
mod pace;
mod pace_fields;
mod plan;
mod plan_book;
mod plan_directory;
mod plan_layer;
mod plan_list;
mod plan_sources;
mod reload;
mod route;
mod runtime_overrides;
mod served_routes;
mod settle;
mod shared;
mod store_spec;
#[cfg(test)]
mod tests;
mod tier;
mod watch;

pub use crate::access_list::{ListKind, MAX_RUNTIME_ENTRIES};
pub use crate::limit_handle::LimitHandle;
pub use entry::PolicyEntry;
pub use error::PolicyError;
pub use extractor::{AppKey, Authenticated, PolicyOptions};
pub use key::{KeySpec, PolicyKey};
pub use load::PolicyTable;
pub use pace::DEFAULT_PACE_PIECE;
pub use plan::{Plan, MAX_PLANS, NO_PLAN};
pub use plan_book::PlanMembers;
pub use plan_directory::PlanDirectory;
pub use plan_list::PlanList;
pub use plan_sources::{PlanKeys, MAX_PLAN_KEYS};
pub use ratelimit_core::plumbing::{
    EntriesFuture, EntriesSink, EntryDigest, EntryTable, SharedEntries, SharedEntry,
};
pub use reload::{LimitChange, PolicyHandle};
pub use route::RouteSpec;
pub use settle::Estimate;
pub use store_spec::StoreSpec;
pub use tier::Tier;
