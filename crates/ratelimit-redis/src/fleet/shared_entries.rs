//! Run-time entries (allow and deny list entries, overrides, keys moved
//! between plans) shared through Redis: [`RedisEntries`], the Redis
//! [`SharedEntries`].
//!
//! Each table is a hash: `{prefix}{entries}:allow`, `{prefix}{entries}:deny`,
//! `{prefix}{entries}:overrides` and `{prefix}{entries}:plans` (one hash
//! slot), one field per entry (a list's entry: a network, or a key's
//! digest; an override's `limit` and key, or the key's digest, joined by a
//! newline; a plan member's key spec and key digest, joined by a newline),
//! its value `UNTIL VALUE` with `UNTIL` the entry's end in ms of Redis's
//! clock (0: none). An entry is written by a script that refuses it past the cap
//! (dropping expired entries first) and publishes `changed` on
//! `{prefix}entries`; every instance following the entries reads the
//! four hashes again (one round trip) on each message, at once after
//! (re)subscribing, and every [`refresh`](RedisEntries::refresh) period
//! (default 5 s), and hands them to its sink with their time left
//! (counted from Redis's clock, so the instances' clocks do not matter).
//!
//! Entries that may be credentials (a list's key entry, an override of a
//! limit keyed on an API key or a token, a plan's member) arrive already as their
//! [`EntryDigest`] ([`SharedEntries::digest`]): `#` and the 32 hex digits
//! of a SipHash-2-4 keyed with the secret at `{prefix}key-secret` (the
//! first instance to connect writes a random one, `SET NX`; every
//! instance reads it back; or one given to
//! [`with_key_secret`](RedisEntries::with_key_secret)), the scheme the
//! stores name secret keys by. So neither the hashes, nor the messages,
//! nor the commands sent hold such a key's text. Each instance following
//! the entries writes back the secret it read if Redis loses it (checked
//! at most once a second, with its reads); were it replaced all the
//! same, the digests stored before match no request any more, and those
//! entries must be added again.
//!
//! Redis may lose the entries too (a restart without persistence, a
//! `FLUSHALL`, a failover to an empty replica). Each read also reads a
//! marker, `{prefix}{entries}:epoch`, a random value the first instance
//! to find it gone writes (`SET NX`), as the stores' write-back does. An
//! instance that reads another marker than the one it read last writes
//! its copy back (each entry with the time it had left, `HSETNX`: an
//! entry written since stays), publishes `changed`, and reads again; it
//! hands over nothing meanwhile, so its copy is never emptied by the loss.
//! A write-back that fails is tried again at the next read. So an entry
//! survives a loss if any instance following the entries read it; an
//! entry removed within one read of the loss (before the instance read
//! again) may come back.

use crate::connect::conn::Conn;
use crate::fleet::key_secret::{hash128, SecretSource, SECRET_SUFFIX};
use crate::outage::failure::{Failure, Kind};
use crate::outage::log_throttle::{LogThrottle, LOG_EVERY};
use crate::{RedisBuildError, Target};
use futures_core::Stream;
use ratelimit_core::plumbing::{
    EntriesFuture, EntriesSink, EntryDigest, EntryTable, SharedEntries, SharedEntry,
};
use std::fmt;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

/// The default period of a full read of the entries.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(5);
/// The most entries of one table read back.
const MAX_READ: usize = 100_000;
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Writes an entry unless its table is at the cap; `KEYS[1]` the table,
/// `ARGV`: field, ttl in ms (0: none), value, cap, channel.
const PUT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= cap then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local u = tonumber(string.match(all[i + 1], '^(%d+)'))
    if u and u > 0 and u <= now then redis.call('HDEL', KEYS[1], all[i]) end
  end
  if redis.call('HLEN', KEYS[1]) >= cap then return 0 end
end
local ttl = tonumber(ARGV[2])
local stop = 0
if ttl > 0 then stop = now + ttl end
redis.call('HSET', KEYS[1], ARGV[1], stop .. ' ' .. ARGV[3])
redis.call('PUBLISH', ARGV[5], 'changed')
return 1
";

/// Writes a copy's entries back where absent (`HSETNX`); `KEYS[1]` the
/// table, `ARGV`: triples of field, ttl in ms (0: none), value.
const RESTORE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 1, #ARGV, 3 do
  local ttl = tonumber(ARGV[i + 1])
  local stop = 0
  if ttl > 0 then stop = now + ttl end
  n = n + redis.call('HSETNX', KEYS[1], ARGV[i], stop .. ' ' .. ARGV[i + 2])
end
return n
";

/// Entries written back per script call.
const RESTORE_BATCH: usize = 1_000;

/// What an instance read last: the marker, its entries and when; and
/// whether a loss seen is not written back yet.
#[derive(Default)]
struct LastRead {
    marker: Option<String>,
    entries: Vec<SharedEntry>,
    at: Option<tokio::time::Instant>,
    owed: bool,
}

/// The run-time entries of a policy table, shared by every instance
/// through Redis (see the module docs); give it to
/// `tower_ratelimit::policy::PolicyHandle::share`. Lookups never reach
/// Redis: each instance keeps a copy.
///
/// ```
/// use ratelimit_redis::RedisEntries;
/// // Connects in the background, on first use.
/// let entries = RedisEntries::new("redis://127.0.0.1/", "myapp:")?;
/// # Ok::<(), ratelimit_redis::RedisBuildError>(())
/// ```
pub struct RedisEntries {
    shared: Arc<Shared>,
    /// Ends the follower once dropped.
    alive: Arc<()>,
}

struct Shared {
    conn: Arc<Conn>,
    prefix: String,
    timeout: Duration,
    refresh: Duration,
    put: redis::Script,
    restore: redis::Script,
    /// The last read, written back after a loss.
    last: std::sync::Mutex<LastRead>,
    /// Orders writes and reads, so that a read never hands over a copy
    /// older than a write made before it.
    order: tokio::sync::Mutex<()>,
    log: LogThrottle<2>,
}

impl fmt::Debug for RedisEntries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisEntries")
            .field("prefix", &self.shared.prefix)
            .field("refresh", &self.shared.refresh)
            .finish_non_exhaustive()
    }
}

impl RedisEntries {
    /// Entries on `target` under `prefix` (no braces), read every
    /// [`DEFAULT_REFRESH`] and at every change; calls wait for Redis up
    /// to 1 s.
    pub fn new(
        target: impl Into<Target>,
        prefix: impl Into<String>,
    ) -> Result<Self, RedisBuildError> {
        Self::with(target, prefix, DEFAULT_REFRESH)
    }

    /// As [`new`](Self::new), read every `refresh` (at least 100 ms).
    pub fn with(
        target: impl Into<Target>,
        prefix: impl Into<String>,
        refresh: Duration,
    ) -> Result<Self, RedisBuildError> {
        Self::build(target.into(), prefix.into(), refresh, None)
    }

    /// As [`with`](Self::with), the entries that may be credentials
    /// hashed with `secret` (the same on every instance sharing them)
    /// instead of the one shared at `{prefix}key-secret`.
    pub fn with_key_secret(
        target: impl Into<Target>,
        prefix: impl Into<String>,
        refresh: Duration,
        secret: [u8; 16],
    ) -> Result<Self, RedisBuildError> {
        Self::build(target.into(), prefix.into(), refresh, Some(secret))
    }

    fn build(
        target: Target,
        prefix: String,
        refresh: Duration,
        secret: Option<[u8; 16]>,
    ) -> Result<Self, RedisBuildError> {
        if prefix.contains(['{', '}']) {
            return Err(RedisBuildError::Prefix(prefix));
        }
        let timeout = Duration::from_secs(1);
        let backend = target.into_backend()?;
        let secret = match secret {
            Some(bytes) => SecretSource::Fixed(bytes),
            None => SecretSource::Shared(format!("{prefix}{SECRET_SUFFIX}")),
        };
        let conn = Arc::new(Conn::new(backend, timeout, secret));
        conn.start();
        Ok(Self {
            shared: Arc::new(Shared {
                conn,
                prefix,
                timeout,
                refresh: refresh.max(BACKOFF_MIN),
                put: redis::Script::new(PUT),
                restore: redis::Script::new(RESTORE),
                last: std::sync::Mutex::default(),
                order: tokio::sync::Mutex::new(()),
                log: LogThrottle::new(LOG_EVERY),
            }),
            alive: Arc::new(()),
        })
    }

    /// How often the entries are read whole, messages aside.
    pub fn refresh(&self) -> Duration {
        self.shared.refresh
    }
}

impl Shared {
    /// A table's hash; the four share a hash tag, so that one pipeline
    /// reads them on a Cluster too.
    fn key(&self, table: EntryTable) -> String {
        let name = match table {
            EntryTable::Allow => "allow",
            EntryTable::Deny => "deny",
            EntryTable::Override => "overrides",
            EntryTable::Plan => "plans",
        };
        format!("{}{{entries}}:{name}", self.prefix)
    }

    fn channel(&self) -> String {
        format!("{}entries", self.prefix)
    }

    /// An entry's field in its table's hash.
    fn field(scope: &str, name: &str) -> String {
        if scope.is_empty() {
            name.to_owned()
        } else {
            format!("{scope}\n{name}")
        }
    }

    /// Runs `work` on the connection within the timeout.
    async fn run<T>(
        &self,
        work: impl AsyncFnOnce(crate::connect::conn::Handle) -> redis::RedisResult<T>,
    ) -> Result<T, Failure> {
        let go = async {
            let (c, _) = self.conn.get(self.timeout).await?;
            work(c).await.map_err(|e| Failure::redis(&e))
        };
        match tokio::time::timeout(self.timeout, go).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no answer within {:?}", self.timeout),
            )),
        }
    }

    /// The digest of entries that may be credentials: keyed with the
    /// secret, read from Redis first if it is not known yet.
    async fn digest(&self) -> Result<EntryDigest, Failure> {
        if self.conn.secret.get().is_none() {
            // A connect reads the secret; a connect that failed to, or
            // an earlier one, is made up for here.
            self.conn.get(self.timeout).await?;
            if self.conn.secret.get().is_none() {
                self.conn.sync_secret(self.timeout).await?;
            }
        }
        let secret = self
            .conn
            .secret
            .get()
            .ok_or_else(|| Failure::new(Kind::Other, "no key secret read from redis yet"))?;
        Ok(EntryDigest::new(move |text| hash128(&secret, text)))
    }

    /// The loss marker's key, in the tables' hash slot.
    fn marker(&self) -> String {
        format!("{}{{entries}}:epoch", self.prefix)
    }

    /// Every standing entry, with its time left by Redis's clock, and
    /// the loss marker (written first if gone).
    async fn read(&self) -> Result<(Vec<SharedEntry>, String), Failure> {
        type Hash = Vec<(String, String)>;
        let fresh = crate::fleet::key_secret::to_hex(&crate::fleet::key_secret::random());
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.marker())
            .arg(fresh)
            .arg("NX")
            .ignore();
        pipe.cmd("GET").arg(self.marker());
        for table in EntryTable::ALL {
            pipe.cmd("HGETALL").arg(self.key(table));
        }
        pipe.cmd("TIME");
        type Read = (Option<String>, Hash, Hash, Hash, Hash, (u64, u64));
        let (marker, allow, deny, overrides, plans, (s, us)): Read = self
            .run(async |mut c| pipe.query_async(&mut c).await)
            .await?;
        let marker = marker
            .ok_or_else(|| Failure::new(Kind::Reply, "the entries' epoch marker was not kept"))?;
        let now_ms = s * 1_000 + us / 1_000;
        let mut out = Vec::new();
        let hashes = [allow, deny, overrides, plans];
        for (table, hash) in EntryTable::ALL.into_iter().zip(hashes) {
            for (field, value) in hash.into_iter().take(MAX_READ) {
                out.extend(entry(table, &field, &value, now_ms));
            }
        }
        Ok((out, marker))
    }

    /// After a read that found `marker`: when it is not the one read last
    /// (or a write-back is owed), writes the last read's entries back and
    /// says so (the caller reads again).
    async fn restore_if_lost(&self, marker: &str) -> Result<bool, Failure> {
        let (entries, at) = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            let before = last.marker.replace(marker.to_owned());
            if before.is_some_and(|m| m != marker) {
                let keys = last.entries.len();
                tracing::warn!(target: "ratelimit_redis", entries = keys, "redis lost the shared run-time entries (their epoch marker changed): writing back this instance's copy");
                last.owed = true;
            }
            if !last.owed {
                return Ok(false);
            }
            (last.entries.clone(), last.at)
        };
        let elapsed = at.map_or(Duration::ZERO, |at| at.elapsed());
        for table in EntryTable::ALL {
            let mut left: Vec<(String, u64, &str)> = Vec::new();
            for e in entries.iter().filter(|e| e.table == table) {
                let ttl = match e.left {
                    None => 0,
                    Some(d) if d > elapsed => millis(d - elapsed),
                    Some(_) => continue,
                };
                left.push((Shared::field(&e.scope, &e.name), ttl, &e.value));
            }
            for batch in left.chunks(RESTORE_BATCH) {
                let mut invocation = self.restore.prepare_invoke();
                invocation.key(self.key(table));
                for (field, ttl, value) in batch {
                    invocation.arg(field).arg(*ttl).arg(*value);
                }
                self.run(async |mut c| invocation.invoke_async::<i64>(&mut c).await)
                    .await?;
            }
        }
        let mut pipe = redis::pipe();
        pipe.cmd("PUBLISH")
            .arg(self.channel())
            .arg("changed")
            .ignore();
        self.run(async |mut c| pipe.query_async::<()>(&mut c).await)
            .await?;
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .owed = false;
        Ok(true)
    }

    /// Counts and logs (throttled) a failure.
    fn failed(&self, stage: &'static str, failure: &Failure) {
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_entries_errors_total", "stage" => stage).increment(1);
        let index = usize::from(stage != "write");
        if let Some(suppressed) = self.log.admit(index, tokio::time::Instant::now()) {
            tracing::warn!(
                target: "ratelimit_redis",
                stage,
                kind = failure.kind.as_str(),
                error = %failure.source,
                suppressed,
                "shared run-time entries: redis failed"
            );
        }
    }

    /// Reads the entries and hands them to `sink`, in order with writes.
    async fn hand_over(&self, sink: &EntriesSink) {
        let _order = self.order.lock().await;
        // The shared secret written back if Redis lost it (a `FLUSHALL`),
        // at most once a second, as the stores do.
        if self.conn.sync_due(crate::KEY_SECRET_SYNC) {
            if let Err(f) = self.conn.sync_secret(self.timeout).await {
                self.failed("read", &f);
            }
        }
        let read = match self.digest().await {
            Ok(digest) => self.read().await.map(|read| (read, digest)),
            Err(f) => Err(f),
        };
        let ((mut entries, marker), digest) = match read {
            Ok(read) => read,
            Err(f) => return self.failed("read", &f),
        };
        match self.restore_if_lost(&marker).await {
            Ok(false) => {}
            // Read again, with what was written back.
            Ok(true) => match self.read().await {
                Ok((again, _)) => entries = again,
                Err(f) => return self.failed("read", &f),
            },
            // The copy stays as it was; tried again at the next read.
            Err(f) => return self.failed("write", &f),
        }
        {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            last.entries.clone_from(&entries);
            last.at = Some(tokio::time::Instant::now());
        }
        sink(entries, digest)
    }
}

/// `d` in whole ms, at least 1 (0 means no end).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The entry of one field, unless it has expired or is not one.
fn entry(table: EntryTable, field: &str, value: &str, now_ms: u64) -> Option<SharedEntry> {
    let (until, value) = value.split_once(' ')?;
    let until: u64 = until.parse().ok()?;
    if until != 0 && until <= now_ms {
        return None;
    }
    let (scope, name) = match table {
        EntryTable::Override | EntryTable::Plan => field.split_once('\n')?,
        _ => ("", field),
    };
    Some(SharedEntry {
        table,
        scope: scope.to_owned(),
        name: name.to_owned(),
        value: value.to_owned(),
        left: (until != 0).then(|| Duration::from_millis(until - now_ms)),
    })
}

/// Hands the entries to `sink` at once, on each message and every
/// refresh, until `alive` is dropped; resubscribes after errors.
async fn follow(shared: Arc<Shared>, alive: Weak<()>, sink: EntriesSink) {
    let mut backoff = BACKOFF_MIN;
    while alive.strong_count() > 0 {
        shared.hand_over(&sink).await;
        let failure = match shared.conn.pubsub().await {
            // A Cluster with no known node: the refresh only.
            None => {
                tokio::time::sleep(shared.refresh).await;
                continue;
            }
            Some(Ok(pubsub)) => match listen(&shared, &alive, &sink, pubsub, &mut backoff).await {
                None => return,
                Some(f) => f,
            },
            Some(Err(e)) => Failure::redis(&e),
        };
        shared.failed("subscribe", &failure);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Hands the entries over on each message and every refresh; the failure
/// that ended the subscription, or `None` once `alive` is dropped.
async fn listen(
    shared: &Shared,
    alive: &Weak<()>,
    sink: &EntriesSink,
    pubsub: redis::aio::PubSub,
    backoff: &mut Duration,
) -> Option<Failure> {
    let (mut sub, stream) = pubsub.split();
    let subscribe = sub.subscribe(shared.channel());
    match tokio::time::timeout(shared.timeout, subscribe).await {
        Ok(Ok(())) => *backoff = BACKOFF_MIN,
        Ok(Err(e)) => return Some(Failure::redis(&e)),
        Err(_) => return Some(Failure::new(Kind::Timeout, "SUBSCRIBE unanswered")),
    }
    // Changes made before the subscription took effect.
    shared.hand_over(sink).await;
    let mut stream = std::pin::pin!(stream);
    loop {
        let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx));
        tokio::select! {
            msg = next => if msg.is_none() {
                return Some(Failure::new(Kind::Io, "pub/sub connection closed"));
            },
            () = tokio::time::sleep(shared.refresh) => {}
        }
        if alive.strong_count() == 0 {
            return None;
        }
        shared.hand_over(sink).await;
    }
}

impl SharedEntries for RedisEntries {
    /// Keyed with the secret the instances share (see the module docs),
    /// read from Redis first if this instance has not yet.
    fn digest(&self) -> EntriesFuture<EntryDigest> {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            shared.digest().await.map_err(|f| {
                shared.failed("write", &f);
                format!("redis failed: {}", f.source)
            })
        })
    }

    fn put(&self, entry: SharedEntry, cap: usize) -> EntriesFuture<()> {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            if entry.scope.contains('\n') {
                return Err("a scope with a newline".to_owned());
            }
            let _order = shared.order.lock().await;
            let ttl = entry.left.map_or(0, |d| {
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
            });
            let mut invocation = shared.put.prepare_invoke();
            invocation
                .key(shared.key(entry.table))
                .arg(Shared::field(&entry.scope, &entry.name))
                .arg(ttl)
                .arg(&entry.value)
                .arg(cap)
                .arg(shared.channel());
            let written = shared
                .run(async |mut c| invocation.invoke_async::<i64>(&mut c).await)
                .await;
            match written {
                Ok(1) => Ok(()),
                Ok(_) => Err(format!(
                    "at most {cap} {} entries added at run time",
                    entry.table.as_str()
                )),
                Err(f) => {
                    shared.failed("write", &f);
                    Err(format!("redis failed: {}", f.source))
                }
            }
        })
    }

    fn remove(&self, table: EntryTable, scope: &str, name: &str) -> EntriesFuture<bool> {
        let shared = Arc::clone(&self.shared);
        let field = Shared::field(scope, name);
        Box::pin(async move {
            let _order = shared.order.lock().await;
            let mut pipe = redis::pipe();
            pipe.cmd("HDEL").arg(shared.key(table)).arg(&field);
            pipe.cmd("PUBLISH")
                .arg(shared.channel())
                .arg("changed")
                .ignore();
            let removed = shared
                .run(async |mut c| pipe.query_async::<(i64,)>(&mut c).await)
                .await;
            match removed {
                Ok((n,)) => Ok(n > 0),
                Err(f) => {
                    shared.failed("write", &f);
                    Err(format!("redis failed: {}", f.source))
                }
            }
        })
    }

    fn follow(&self, sink: EntriesSink) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(target: "ratelimit_redis", "no tokio runtime: shared run-time entries not followed");
            return;
        };
        runtime.spawn(follow(
            Arc::clone(&self.shared),
            Arc::downgrade(&self.alive),
            sink,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back() {
        let e = entry(EntryTable::Allow, "10.0.0.0/8", "2000 ", 1_500).unwrap();
        assert_eq!(
            (e.name.as_str(), e.left),
            ("10.0.0.0/8", Some(Duration::from_millis(500)))
        );
        assert!(entry(EntryTable::Allow, "10.0.0.0/8", "1500 ", 1_500).is_none());
        let o = entry(EntryTable::Override, "login\n10.0.0.7", "0 gcra 5/1m", 9).unwrap();
        assert_eq!(
            (o.scope.as_str(), o.name.as_str(), o.value.as_str(), o.left),
            ("login", "10.0.0.7", "gcra 5/1m", None)
        );
        assert!(entry(EntryTable::Override, "no-newline", "0 gcra 5/1m", 9).is_none());
        let p = entry(EntryTable::Plan, "api-key\n#00ff", "0 pro", 9).unwrap();
        assert_eq!(
            (p.scope.as_str(), p.name.as_str(), p.value.as_str(), p.left),
            ("api-key", "#00ff", "pro", None)
        );
        assert!(entry(EntryTable::Deny, "k", "junk", 9).is_none());
    }
}
