//! A Redis store for ratelimit-core: the same exact algorithms, shared by
//! every instance, one atomic round trip per check, and a failure policy
//! that keeps the service up when Redis is not.
//!
//! [`RedisStore`] implements [`ratelimit_core::Store`], so the HTTP layer
//! uses it exactly like the in-memory store, for any of the six
//! algorithms. Its decisions are identical to ratelimit-core's for the same
//! times, in every field of [`Decision`](ratelimit_core::Decision), as
//! [`docs/ALGORITHMS.md`](https://github.com/ratelimit-rs/ratelimit/blob/main/docs/ALGORITHMS.md)
//! defines them.
//!
//! ```
//! use ratelimit_core::{Clock, SlidingWindow, Store, SystemClock};
//! use ratelimit_redis::{BreakerConfig, RedisStore};
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let url = "redis://127.0.0.1:6379/";
//!     # // Nothing listens on port 1: this example runs on the fallback.
//!     # let url = "redis://127.0.0.1:1/";
//!     let store = RedisStore::builder(url, SlidingWindow::new(1000, Duration::from_secs(3600))?)
//!         .prefix("myapp:rl:")
//!         .timeout(Duration::from_millis(25))
//!         .breaker(BreakerConfig { failure_threshold: 3, cool_down: Duration::from_millis(500) })
//!         .fallback_to_memory(50_000)
//!         .build()?;
//!     // The time is Redis's; the in-memory fallback uses the caller's.
//!     let clock = SystemClock::new();
//!     let d = store.check("user:42", 1, clock.now()).await?;
//!     if !d.allowed {
//!         println!("retry after {:?}", d.retry_after());
//!     }
//!     # assert!(d.allowed);
//!     Ok(())
//! }
//! ```
//!
//! # One round trip, one clock
//!
//! Every check (and refund, and settlement: `Store::settle`, which may
//! leave a key in debt, see `docs/ALGORITHMS.md`) is one `EVALSHA` of a
//! Lua script that reads the key's state, decides, and writes it back
//! atomically. Building a store
//! (on a tokio runtime) starts its connection in the background, and every
//! connect loads the scripts of the stores on it (in one round trip) and
//! reads the key secret (see "Secret keys") before any check uses it; a
//! script added later (a live store's new settings) is loaded once before
//! its first check; `EVALSHA` reloads it on `NOSCRIPT` (a `SCRIPT FLUSH`,
//! a failover). A check waits for the store's first connection up to the
//! connect timeout, not its own: the first check after start is one round
//! trip under the timeout, like every other. The time
//! is the server's `TIME`, read inside the script, so the instances'
//! clocks don't matter ([`TimeSource::Redis`], the default); tests and
//! fleets with synchronised clocks can pass the time instead
//! ([`TimeSource::Caller`]). `TIME` is the server's wall clock: should it
//! step back, GCRA and the buckets simply see more of the limit used, a
//! fixed window keeps its end, and the sliding window and log stay at
//! their latest window or entry instead of resetting.
//!
//! # Keys
//!
//! The key of `user:42` is `{prefix}{user:42}:{algorithm}:{fingerprint}`.
//! The braces make the caller's key the Redis Cluster hash tag, so all the
//! state of one key (for every limit on it) lives in one slot; the
//! fingerprint of the algorithm and its parameters keeps two limits on the
//! same key apart, and a changed limit starts afresh. Every check touches
//! that one key, so with the `cluster` feature a store on a
//! `redis::cluster::ClusterClient` (see [`Target`]) sends each check to
//! the node owning its slot (tested on a three-node cluster).
//!
//! A store following a `LiveAlgorithm` (`LiveRedis`, feature `live`) is
//! the exception: its key is `{prefix}{key}:live` whatever the settings,
//! and each state is written with a stamp of the settings it was written
//! under, so that new settings (or a key's override) carry the state over
//! in the script instead of starting afresh (see `LiveRedis`).
//!
//! # Secret keys
//!
//! A key marked secret (`ratelimit_core::algorithm::StableKey::is_secret`: the keys
//! of tower-ratelimit's `ApiKey` and `Bearer` extractors, of a `Header`
//! marked secret or carrying credentials, and a composite holding one)
//! never reaches Redis as text, whatever its length: the store names it
//! `#` and the 32 hex digits of its keyed SipHash-2-4 (128 bits), in its
//! Redis key, its deny cache, leases and fallback alike
//! (`{prefix}{#5f0c...}:gcra:...`), so neither `SCAN` nor `MONITOR`
//! shows it. The hash's secret must be the same on every instance sharing
//! the Redis, or each would count a key under a name of its own:
//!
//! - given by [`RedisStoreBuilder::key_secret`] (`key-secret` in
//!   [`StoreSettings`]), it is used as is and never stored;
//! - otherwise it is shared through Redis at `{prefix}key-secret`: each
//!   connect writes this instance's secret (a random one the first time)
//!   with `SET NX` and reads back what Redis holds, so the first instance's
//!   wins, and every instance caches it (checks never read it). Should
//!   Redis lose it (`FLUSHALL`, a failover to an empty replica), each
//!   instance writes its cached one back, the same way, at its next
//!   connect and every [`KEY_SECRET_SYNC`] at
//!   [`maintain`](ratelimit_core::store::Upkeep::maintain) (the HTTP layer calls
//!   it every second): the names do not change. An instance finding
//!   another secret there (two fleets on one prefix, or a new instance
//!   that wrote first after a flush) adopts it, logs a warning, and its
//!   secret keys start afresh once.
//!
//! A secret key checked before the first connect has read the secret
//! waits for it like the check waits for the connection; if the secret
//! cannot be read (an ACL denying `SET` or `GET` on that key), its checks
//! take the failure policy (the fallback counts it under its text, in this
//! process's memory only). A fixed window anchored at a key offset derives
//! a secret key's phase from its hashed name, in Redis and in the fallback.
//!
//! Keys longer than 64 bytes (tower-ratelimit's `HeaderKey`) arrive as
//! `#` and a digest that is the same in every process, so every instance
//! names them alike with nothing to set up; a long secret key is hashed
//! again with the key secret, like any secret key.
//!
//! Upgrading from a version that stored secret keys as text: their old
//! keys are simply never read again and expire with their TTL (about a
//! second after they were full again); each client's count restarts once,
//! under the hashed name. Keys not marked secret keep their names.
//!
//! Every key carries a TTL (`PX`): it vanishes about a second after its
//! state is back to full. The sliding log is a hash used as a deque,
//! holding at most `limit` entries, as in memory.
//!
//! # Exactness
//!
//! Lua numbers are doubles, exact only below 2^53, while a time is about
//! 1.7e18 ns since 1970 and GCRA's scaled time is that times `L /
//! gcd(L, P)`. The scripts never hold such a number:
//!
//! - a time is a pair (seconds, nanoseconds); only differences of times,
//!   bounded by the window, are formed as one number;
//! - a scaled quantity (GCRA, token and leaky bucket, where `T = P / L` is
//!   a whole number of `1/scale` ns) is a pair `(w, f)` = `w * scale + f`,
//!   with `w` whole nanoseconds and `0 <= f < scale`; sums, differences and
//!   small multiples carry between the parts, and `floor(x / T)` is a
//!   double estimate corrected by exact comparisons;
//! - `t mod P` is `((s mod P/g) * (1e9 mod P) + ns) mod P` with
//!   `g = gcd(P, 1e9)`, through an exact `mulmod` when the product is
//!   large, and the sliding window's `prev * (P - e)` against `room * P` is
//!   an exact `muldivmod` (quotient and remainder), never a rounded
//!   product;
//! - every division goes through `math.fmod`, which is exact.
//!
//! State is stored as decimal strings (`seconds:nanoseconds:rest`). This
//! holds while windows stay below 2^51 ns (26 days) and `limit` (burst,
//! queue) times `L / gcd(L, P)` below 2^51; [`RedisStoreBuilder::build`]
//! rejects anything larger rather than decide inexactly. A fixed window of
//! calendar weeks runs as 7-day windows in phase with Monday, one of
//! calendar months finds its bounds by the calendar in the script (a month,
//! at most 31 days, stays below 2^53 ns); calendar years are rejected.
//! The integration
//! tests compare every decision with ratelimit-core's on random traces at
//! real epoch times, including `3 per 1s` and `7 per 1s`.
//!
//! # Several limits in one round trip
//!
//! A store built with [`and_limit`](RedisStoreBuilder::and_limit) checks
//! several limits on one key in one script: the limits run in order, each
//! as its own script would, and the first denial stops the check and puts
//! back the state of the limits that admitted before it (`DUMP` before,
//! `RESTORE` after, in the same script), so a request is admitted by all
//! or consumes nothing anywhere. The script is atomic, so this is exact
//! under any concurrency, across instances: it decides as the limits would
//! in memory, checked in order under one lock (the integration tests
//! compare it with that on random traces). Every limit's key has the
//! caller's key as its hash tag, so on a Cluster they share one slot. A
//! refund gives back to every limit. Given to the HTTP layer as one limit,
//! it answers with one set of headers (see `and_limit` for which limit's).
//!
//! # The deny cache
//!
//! Under a flood, most checks are denials, and each would cost the shared
//! Redis a round trip. So once Redis denies a cost-1 check of key K with
//! wait `w`, the store answers K's cost-1 checks itself until `w` has
//! passed, or 1 s, whichever comes first ([`RedisStoreBuilder::deny_cache`], on by default): the decision
//! is the one Redis would give (denied, `remaining` 0, `wait` and `reset`
//! counted down; the HTTP layer's headers and metrics are the same), with
//! no round trip (with the `metrics` feature, counted in
//! `ratelimit_redis_deny_cache_hits_total`). A refund from this store
//! clears K. Memory is a fixed
//! table ([`DEFAULT_DENY_CACHE`] keys) that evicts the denial ending first
//! when full; keys are told apart by a 64-bit hash seeded per store.
//!
//! For one instance the cache is exact: nothing but an admission moves a
//! state before `w` ends (ALGORITHMS.md: a denied request is admitted at
//! `t + wait` and still denied at any earlier time), and K admits nothing
//! before then. Costs other than 1 always go to Redis: a peek's
//! `remaining` moves, and so does a cost-n denial's. The wait is counted
//! on the local monotonic clock from before the call
//! ([`TimeSource::Redis`]) or on the caller's `now`
//! ([`TimeSource::Caller`]), so it never ends later than Redis's.
//!
//! What it can get wrong, with instances sharing K: it only ever denies,
//! so it never admits more than Redis would. It denies a request Redis
//! would admit only when K's state became emptier, after the cached
//! denial, by something other than time: another instance's refund (or a
//! key deleted or flushed). A reset, a ban or an unban made through another
//! store reaches this one at once by Redis pub/sub (on `{prefix}invalidate`,
//! the key by the name its Redis keys have), which forgets the key's
//! cached denial and lease; a missed message (the subscriber reconnecting;
//! a Cluster made from an app's own `ClusterClient`, which knows no node
//! to subscribe to) falls back on the bound below.
//! It then denies for the rest of `w`, and for at most 1 s: a denial is
//! answered locally for 1 s at most, then Redis is asked again (a key
//! denied without end costs one round trip a second per instance). A
//! cost-1 wait is bounded by the algorithm too:
//!
//! | algorithm | longest cost-1 wait (a wrong denial also ends within 1 s) |
//! |---|---|
//! | GCRA, token bucket | `T = P / L`, one emission interval |
//! | leaky bucket | `T`: the next departure frees a place in the queue |
//! | fixed window | `P`, to the window's end |
//! | sliding log | `P`, until the oldest entry leaves |
//! | sliding window | `2P` (`P + P / L` once `L >= 2`) |
//!
//! The cost it can leave unused meanwhile is at most what the other
//! instance refunded, and the other instances may still take it. The
//! leaky bucket's held requests (admitted with a wait; the HTTP layer's
//! shaping mode) are admissions, never cached; a held request cancelled on
//! this instance is refunded here and clears K, one cancelled elsewhere is
//! the refund case above (at most `T`). The integration tests check these
//! bounds (`tests/it/deny_cache.rs`).
//!
//! # Leases
//!
//! With [`lease(n, ttl)`](RedisStoreBuilder::lease) (off by default), a
//! cost-1 check of a hot key (one checked within `ttl` before: a flood of
//! distinct keys takes no leases) without a lease takes `n` units from
//! Redis in one check of cost `n` (when fewer are left, what is left, if
//! 2 or more), and this store spends them on that key's next cost-1
//! checks locally, for up to `ttl`: a hot key costs one round trip per `n`
//! requests. Unspent units are refunded when the lease expires (at the
//! key's next check or at [`maintain`](ratelimit_core::store::Upkeep::maintain)),
//! when the table ([`DEFAULT_LEASES`] keys) evicts it, at
//! [`release_leases`](RedisStore::release_leases), or in a task when the
//! store is dropped on a tokio runtime. A request served from a lease
//! reports Redis's `remaining` at the take plus the lease's unspent units.
//!
//! Leases trade exactness for round trips. Units are counted in Redis when
//! taken, not when spent, so with `k` instances and leases of `n`:
//!
//! - over-admission: units taken at the end of one window and spent in the
//!   next add to that window's own limit, so any window (of any
//!   algorithm: for GCRA and the buckets, any burst) can see up to
//!   `k * (n - 1)` requests more than the limit admits; the fleet never
//!   takes more than the limit from Redis;
//! - under-admission: units leased by an instance that then goes quiet are
//!   missing for the others, up to `k * (n - 1)`, until the lease expires
//!   (`ttl`) and they are refunded (a fixed window ignores a refund made
//!   after the window it was taken in: those units are lost with it).
//!
//! The integration tests reach the over-admission bound exactly, and not
//! beyond (`tests/it/lease.rs`). Choose `n` small against the limit.
//!
//! # When Redis fails
//!
//! Anything but a decision from Redis is a store failure, and every
//! failure is handled alike, whatever its kind:
//!
//! - it takes the failure policy: with
//!   [`fallback_to_memory`](RedisStoreBuilder::fallback_to_memory), the
//!   check is decided in a local, bounded
//!   [`MemoryStore`](ratelimit_core::MemoryStore) of the same algorithm (so
//!   the limit holds, per instance); without, it fails with a
//!   [`StoreError`](ratelimit_core::StoreError) of the kind's class,
//!   [`Unavailable`](ratelimit_core::StoreError::Unavailable) or
//!   [`Refused`](ratelimit_core::StoreError::Refused) (column "class"
//!   below), named by the kind and carrying the `redis::RedisError` as its
//!   source (`rate-limit store refused the call (oom): ...`), and the HTTP
//!   layer's policy decides (fail-open by default, or fail-closed with a
//!   503);
//! - it counts toward the circuit breaker ([`BreakerConfig`]): after
//!   `failure_threshold` consecutive failures the breaker opens, and calls
//!   stop touching Redis; after the cool-down one probe goes through
//!   (half-open), and its success closes the breaker;
//! - with the `metrics` feature it is counted in
//!   `ratelimit_redis_errors_total{kind}` (and a fallback decision in
//!   `ratelimit_redis_fallback_total`);
//! - it is logged at `warn` (target `ratelimit_redis`) with its kind, at
//!   most three lines a minute per kind, each carrying `suppressed`: the
//!   failures of its kind not logged since the previous line. The breaker
//!   logs its opening (`warn`) and closing (`info`) the same way (target
//!   `ratelimit_redis::breaker`) and, with `metrics`, counts them
//!   (`ratelimit_redis_breaker_transitions_total{from,to}`, gauge
//!   `ratelimit_redis_breaker_state`).
//!
//! | failure | `kind` | class | typical cause |
//! |---|---|---|---|
//! | no answer within the timeout ([`DEFAULT_TIMEOUT`], 50 ms; see "A slow Redis") | `timeout` | unavailable | server hung, paused (`CLIENT PAUSE`), overloaded, network |
//! | connection refused, reset or closed | `io` | unavailable | server down or restarting; reconnects run in the background |
//! | breaker open: Redis not called | `breaker_open` | unavailable | the failures above; counted, not logged per call |
//! | `OOM` | `oom` | refused | `maxmemory` reached with `noeviction` |
//! | `NOPERM` | `noperm` | refused | an ACL denies `EVALSHA`, or `SCRIPT LOAD` for the reload |
//! | `NOAUTH`, or a command refused before `AUTH` | `noauth` | refused | a password is required and the URL has none |
//! | `WRONGPASS`, authentication failed when connecting | `wrongpass` | refused | wrong user or password |
//! | `READONLY` | `readonly` | unavailable | the server is (now) a replica |
//! | `MASTERDOWN` | `masterdown` | unavailable | a replica lost its master (`replica-serve-stale-data no`) |
//! | `BUSY` | `busy` | unavailable | another script runs past `busy-reply-threshold` |
//! | `LOADING` | `loading` | unavailable | the server is loading its dataset |
//! | `CLUSTERDOWN`, `TRYAGAIN` | `clusterdown`, `tryagain` | unavailable | cluster without quorum, slot migrating |
//! | `MISCONF` | `misconf` | refused | writes stopped after a failed snapshot |
//! | `WRONGTYPE` | `wrongtype` | refused | something else wrote at the store's key |
//! | `ERR` | `err` | refused | the script failed (an unreadable state at the key), or a command refused |
//! | `NOSCRIPT` after reloading the script | `noscript` | refused | scripts flushed again at once, a proxy |
//! | a reply of the wrong type or shape | `reply` | refused | not a Redis, or a proxy mangling replies |
//! | any other error | `other` | refused | an unknown error code, a client-side error |
//!
//! Key-level failures (`wrongtype`, `err` on a corrupt state) count toward
//! the breaker too. The count is of consecutive failures: a bad key opens
//! the breaker only when `failure_threshold` of its calls come in a row,
//! with no decision on another key between them, while a broken script or
//! server opens it at once. The key itself stays limited, in the fallback.
//!
//! # A slow Redis
//!
//! The timeout measures Redis's answer: it starts when the call has its
//! connection with the script loaded, and a call waits for a connection
//! apart from it (for the store's first connection up to the connect
//! timeout, for a reconnect up to the timeout). An answer within the
//! timeout, however slow, is a decision, and never counts toward the
//! breaker. Calls share one multiplexed connection, pipelined: a slower
//! network delays each answer by its own round trip, and does not queue
//! them behind each other. When the breaker opens, the store reconnects
//! in the background, keeping the current connection for the probe until
//! the new one is ready (a probe never waits on a reconnect). The tests
//! run 320 checks, 64 at a time, from a store's first moment, through a
//! proxy adding a 300 ms round trip, with a 700 ms timeout and a breaker
//! opening at the first failure: every check is decided by Redis
//! (`tests/it/slow.rs`). A timeout that covered connecting and loading
//! the script (three round trips on a fresh store) would fail the first
//! checks whenever Redis is slower than a third of the timeout.
//!
//! A busy host is not a slow Redis either. The connections are driven
//! (their sockets written and read) on a thread of their own,
//! `ratelimit-redis-io` (one per process, started with the first
//! connection), not on the application's runtime: there, under a flood
//! that keeps every worker busy, the connection's driver task waited in
//! the run queue behind the flood's tasks, and an answer Redis had sent
//! in a millisecond reached the waiting call after the timeout. A call
//! whose own task runs late still takes an answer that has arrived: the
//! timeout only wins when the answer has not. The tests saturate a
//! 2-thread runtime with a thousand spinning tasks: no check of 80 times
//! out at 250 ms, where on the application's runtime about half did
//! (`tests/it/busy_host.rs`). The pub/sub subscriber that tells bans and
//! resets (see "The deny cache") still runs on the application's runtime.
//!
//! What a failure costs in exactness, with `L` the limit (a window's, or
//! a burst for GCRA and the buckets) and `k` instances:
//!
//! - a check that times out may still have reached Redis, and be applied
//!   there once Redis gets to it: it counts against the key in Redis
//!   although the caller's decision came from the failure policy (the
//!   fallback's, or the HTTP layer's). This only ever takes quota from the
//!   client, never gives it (tested with `CLIENT PAUSE`);
//! - each fallback counts on its own, from empty, and admits its share
//!   of the limit: every instance with a fallback announces itself
//!   through Redis every [`INSTANCE_ANNOUNCE_EVERY`] (a sorted set at
//!   `{prefix}instances:{limits}` of random instance ids scored by Redis's
//!   time) and remembers how many it saw within [`INSTANCE_SEEN_WITHIN`],
//!   `k`. While Redis gives no decisions, a call of cost `c` takes
//!   `min(c * k, L)` of the limit in the fallback
//!   ([`outage_share`](RedisStoreBuilder::outage_share), on by default):
//!   each instance admits `floor(L / k)` per window (at least 1; at `1/k`
//!   of the rate), so the fleet's fallbacks admit at most `max(L, k)`
//!   together, on top of what Redis admitted in that window: an outage
//!   costs the fleet about `L` (at most `L + max(L, k)` in a window it
//!   overlaps), not `(k + 1) * L`, and only `L` once Redis is back for the
//!   window. Its limits: `k` is the count last seen while Redis answered,
//!   and stays so through the outage (an instance that started during it
//!   never saw Redis, counts `k = 1` and admits the whole limit; one that
//!   stopped before it is counted for up to [`INSTANCE_SEEN_WITHIN`], so
//!   the others admit less); the first announcement of a new instance
//!   reaches the others within [`INSTANCE_ANNOUNCE_EVERY`]; an
//!   announcement Redis refuses (an ACL without `EVAL`, `OOM`) is logged
//!   once a process (`warn`) and leaves `k` as it was. A decision's
//!   `remaining` in the fallback counts this instance's share. With the
//!   share off, each instance admits up to `L` locally, and the fleet at
//!   most `(k + 1) * L` in a window that an outage (or a breaker held
//!   open) overlaps. The tests reach both bounds exactly, and not beyond
//!   (`tests/it/outage_share.rs`, `tests/it/slow.rs`). A live store's
//!   fallback keeps what each key used across changes of the settings
//!   (`LiveRedis`, feature `live`): reloads during an outage add nothing to the
//!   bound. Keep the breaker's threshold and the timeout such that a slow
//!   but healthy Redis never trips them (above), and the bound is paid
//!   only in an outage;
//! - the fallback refuses the keys its instance holds as banned (made
//!   there, answered by Redis, or told by another instance) to the ban's
//!   end, and a reset meanwhile does not lift one; an instance that never
//!   saw a key's ban decides it on the algorithm alone
//!   (`docs/ALGORITHMS.md`, "Bans").
//!
//! Without a fallback, whether requests pass while Redis fails is the
//! HTTP layer's policy, which by default lets them through: a limit that
//! guards something (logins, say) wants the fallback, or fail-closed.
//!
//! A library installs no log subscriber: in an app without one (such as
//! `tracing_subscriber::fmt().init()` at startup), a fallback is silent.
//! To see outages without logs, count them with the `metrics` feature, or
//! read [`RedisStore::breaker_state`] (in a health check, say): it is
//! [`Open`](BreakerState::Open) while Redis is skipped.
//!
//! # When Redis loses its data
//!
//! A Redis restarted without persistence, flushed, or failed over to an
//! empty replica forgets every state and ban. Each store holds, by name,
//! its keys' standing bans and Redis's answers that left a key nothing
//! (`remaining` 0), with the instant each ends (4,096
//! keys at most per store), and notices the loss
//! by a marker, `{prefix}epoch`, read at
//! [`maintain`](ratelimit_core::store::Upkeep::maintain) every
//! [`WRITE_BACK_EVERY`] and at once when Redis admits a key it holds as
//! refused. It then writes them back ([`RedisStore::write_back`]): a ban
//! for what is left of it, a denial as a refusal until its instant. A
//! write-back only moves an end later, so instances writing back one key
//! agree; failures are reported as store failures and tried again. A key
//! no instance holds starts empty: one more limit per loss.
//! `docs/ALGORITHMS.md` ("Redis losing its data") states the bound; the
//! README gives the persistence that loses nothing.

mod admin;
mod any_store;
mod builder;
mod check_future;
mod connect;
mod fleet;
mod inner;
#[cfg(feature = "live")]
mod live;
mod outage;
mod scripts;
mod store;
mod store_state;

pub use any_store::{AnyStore, LimitSettings, StoreSettings};
pub use builder::{
    RedisStoreBuilder, DEFAULT_DENY_CACHE, DEFAULT_LEASES, DEFAULT_PREFIX, DEFAULT_TIMEOUT,
    MAX_LIMITS,
};
pub use check_future::StoreFuture;
#[cfg(feature = "cluster")]
pub use connect::cluster_target::ClusterTarget;
pub use connect::conn::Connection;
#[cfg(feature = "sentinel")]
pub use connect::target::SentinelTarget;
pub use connect::target::Target;
pub use connect::time_source::TimeSource;
pub use fleet::key_secret::KeySecret;
pub use fleet::roster::{INSTANCE_ANNOUNCE_EVERY, INSTANCE_SEEN_WITHIN};
pub use fleet::shared_entries::{RedisEntries, DEFAULT_REFRESH};
pub use fleet::write_back::WRITE_BACK_EVERY;
pub use inner::RedisStore;
#[cfg(feature = "live")]
pub use live::LiveRedis;
pub use outage::breaker::{BreakerConfig, BreakerState};
pub use store::KEY_SECRET_SYNC;
pub use store_state::StoreState;

use std::fmt;

/// Why a [`RedisStore`] could not be built.
///
/// ```
/// use ratelimit_core::Gcra;
/// use ratelimit_redis::{RedisBuildError, RedisStore};
/// use std::time::Duration;
///
/// let gcra = Gcra::new(5, Duration::from_secs(60)).unwrap();
/// let err = RedisStore::builder("redis://127.0.0.1/", gcra).prefix("{bad}").build();
/// assert!(matches!(err, Err(RedisBuildError::Prefix(_))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisBuildError {
    /// The connection URL is invalid.
    Url(String),
    /// The key prefix contains `{` or `}`, which would break the Redis
    /// Cluster hash tag.
    Prefix(String),
    /// The algorithm's numbers exceed the range the scripts compute
    /// exactly in.
    Unsupported(String),
    /// A key secret that is not 32 hex digits (the text says why, without
    /// the secret).
    KeySecret(String),
    /// The TLS CA file cannot be read or holds no PEM certificate (its
    /// path, and why).
    TlsCa(String),
    /// A limit name that breaks the rule
    /// ([`is_valid_limit_name`](ratelimit_core::plumbing::is_valid_limit_name)).
    LimitName(String),
    /// A setting out of range (a fallback of 0 keys, a lease of 1 unit, a
    /// memory store's cap of 0 keys), naming it and its value.
    Setting(String),
}

impl fmt::Display for RedisBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => write!(f, "bad redis url {e}"),
            Self::Prefix(p) => write!(f, "key prefix {p:?} must not contain braces"),
            Self::Unsupported(e) => write!(f, "not supported by the redis store: {e}"),
            Self::KeySecret(why) => write!(f, "bad key secret: {why}"),
            Self::TlsCa(e) => write!(f, "bad TLS CA file {e}"),
            Self::Setting(e) => write!(f, "bad setting {e}"),
            Self::LimitName(n) => write!(
                f,
                "bad limit name {n:?}: a name is {}",
                ratelimit_core::plumbing::LIMIT_NAME_RULE
            ),
        }
    }
}

impl std::error::Error for RedisBuildError {}
