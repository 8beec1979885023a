//! Pub/sub invalidation: a reset, a ban or an unban made through one store
//! reaches every store sharing the Redis and the prefix at once.
//!
//! Each such change, once Redis has it, is published on the channel
//! `{prefix}invalidate` as `r NAME` (reset), `u NAME` (unban) or
//! `b MS NAME` (a ban of `MS` ms), where `NAME` is the key as it appears in
//! the store's Redis key names (the keyed hash of a secret key, never its
//! text). Every store subscribed forgets the key's cached denial and lease
//! (a reset also drops the fallback's state of it, an unban its ban there,
//! and a ban bans it there too, at its next use), and a ban is remembered
//! as a standing denial in the deny cache, so the next check of the key on
//! any instance sees the change.
//!
//! One subscriber connection per store connection (every store built on
//! it, a live store's versions and overrides included), in a background
//! task that reconnects after errors (backing off from 100 ms to 5 s) and
//! ends when the connection's last store is dropped. Failures to publish
//! or to subscribe are counted (`ratelimit_redis_invalidation_errors_total`
//! by `stage`) and logged a few times a minute at most. Messages missed
//! while the subscriber was down cost nothing lasting: a cached denial is
//! asked again within a second (`deny_cache::MAX_AGE`), a lease ends at its
//! ttl. On a Redis Cluster a `PUBLISH` reaches every node, so the
//! subscriber connects to one node (the next one after an error); a
//! Cluster made from an app's own `ClusterClient` knows no node to
//! subscribe to (see [`ClusterTarget`](crate::ClusterTarget)): there, the
//! deny cache's second and the leases' ttl bound what another instance
//! misses.

use crate::connect::conn::Conn;
use crate::outage::failure::{Failure, Kind};
use crate::outage::log_throttle::{LogThrottle, LOG_EVERY};
use futures_core::Stream;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// What ends the channel's name, after the store's prefix.
pub(crate) const CHANNEL_SUFFIX: &str = "invalidate";
/// Longer messages are not ours and are ignored.
const MAX_MESSAGE: usize = 4_096;
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The longest a `SUBSCRIBE` may take.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often an idle subscriber checks that its stores still exist.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A change of one key, made through some store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Its state deleted.
    Reset,
    /// Its ban lifted.
    Unban,
    /// Banned for `ms` from now.
    Ban { ms: u64 },
}

impl Change {
    /// The message telling every store of this change of `name`.
    pub(crate) fn encode(self, name: &str) -> String {
        match self {
            Self::Reset => format!("r {name}"),
            Self::Unban => format!("u {name}"),
            Self::Ban { ms } => format!("b {ms} {name}"),
        }
    }

    /// The change a message tells, and the key's name; `None` for
    /// anything else.
    pub(crate) fn decode(message: &str) -> Option<(Self, &str)> {
        if message.len() > MAX_MESSAGE {
            return None;
        }
        let (op, rest) = message.split_once(' ')?;
        let (change, name) = match op {
            "r" => (Self::Reset, rest),
            "u" => (Self::Unban, rest),
            "b" => {
                let (ms, name) = rest.split_once(' ')?;
                (
                    Self::Ban {
                        ms: ms.parse().ok()?,
                    },
                    name,
                )
            }
            _ => return None,
        };
        (!name.is_empty()).then_some((change, name))
    }
}

/// A store told of other stores' changes.
pub(crate) trait Listener: Send + Sync {
    /// Applies `change` of the key named `name` to what this store keeps
    /// locally.
    fn apply(&self, change: Change, name: &str);
}

/// The channel of the stores with `prefix`.
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}{CHANNEL_SUFFIX}")
}

/// Where failures happen, the `stage` label.
#[derive(Clone, Copy)]
enum Stage {
    Publish = 0,
    Subscribe = 1,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Self::Publish => "publish",
            Self::Subscribe => "subscribe",
        }
    }
}

type Listeners = HashMap<String, Vec<Weak<dyn Listener>>>;

/// The subscriber of one connection's stores.
struct Bus {
    conn: Weak<Conn>,
    /// The stores, by channel.
    channels: Mutex<Listeners>,
    /// A channel was added.
    joined: Notify,
    started: std::sync::atomic::AtomicBool,
    log: LogThrottle<2>,
}

impl Bus {
    fn channels(&self) -> MutexGuard<'_, Listeners> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the subscriber, once, on the current tokio runtime (none:
    /// the next store built or change published starts it).
    fn start(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if tokio::runtime::Handle::try_current().is_err()
            || self.started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        tokio::spawn(Arc::clone(self).run());
    }

    /// Counts and logs (throttled) a failure at `stage`.
    fn failed(&self, stage: Stage, failure: &Failure) {
        #[cfg(feature = "metrics")]
        metrics::counter!("ratelimit_redis_invalidation_errors_total", "stage" => stage.as_str())
            .increment(1);
        if let Some(suppressed) = self.log.admit(stage as usize, tokio::time::Instant::now()) {
            tracing::warn!(
                target: "ratelimit_redis",
                stage = stage.as_str(),
                kind = failure.kind.as_str(),
                error = %failure.source,
                suppressed,
                "redis pub/sub invalidation failed: other instances see admin changes within a second"
            );
        }
    }

    async fn run(self: Arc<Self>) {
        let mut backoff = BACKOFF_MIN;
        loop {
            let Some(conn) = self.conn.upgrade() else {
                return;
            };
            let opened = conn.pubsub().await;
            drop(conn);
            let failure = match opened {
                None => {
                    tracing::debug!(target: "ratelimit_redis", "a Redis Cluster with no known node: no pub/sub invalidation subscriber");
                    return;
                }
                Some(Ok(pubsub)) => match self.serve(pubsub, &mut backoff).await {
                    None => return,
                    Some(failure) => failure,
                },
                Some(Err(e)) => Failure::redis(&e),
            };
            self.failed(Stage::Subscribe, &failure);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Subscribes to every channel (those added later too) and applies
    /// each message; the failure that ended it, or `None` once no store
    /// is left.
    async fn serve(&self, pubsub: redis::aio::PubSub, backoff: &mut Duration) -> Option<Failure> {
        let (mut sink, stream) = pubsub.split();
        let mut stream = std::pin::pin!(stream);
        let mut subscribed: HashSet<String> = HashSet::new();
        loop {
            let wanted: Vec<String> = self
                .channels()
                .keys()
                .filter(|c| !subscribed.contains(*c))
                .cloned()
                .collect();
            if !wanted.is_empty() {
                match tokio::time::timeout(SUBSCRIBE_TIMEOUT, sink.subscribe(&wanted)).await {
                    Ok(Ok(())) => {
                        subscribed.extend(wanted);
                        *backoff = BACKOFF_MIN;
                    }
                    Ok(Err(e)) => return Some(Failure::redis(&e)),
                    Err(_) => return Some(Failure::new(Kind::Timeout, "SUBSCRIBE unanswered")),
                }
            }
            let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx));
            tokio::select! {
                msg = next => match msg {
                    Some(msg) => self.dispatch(msg.get_channel_name(), msg.get_payload_bytes()),
                    None => return Some(Failure::new(Kind::Io, "pub/sub connection closed")),
                },
                () = self.joined.notified() => {}
                () = tokio::time::sleep(CHECK_EVERY) => {
                    if self.conn.strong_count() == 0 {
                        return None;
                    }
                }
            }
        }
    }

    /// Applies one message to the stores of its channel.
    fn dispatch(&self, channel: &str, payload: &[u8]) {
        let Some((change, name)) = std::str::from_utf8(payload).ok().and_then(Change::decode)
        else {
            return;
        };
        let listeners: Vec<Arc<dyn Listener>> = {
            let mut channels = self.channels();
            let Some(list) = channels.get_mut(channel) else {
                return;
            };
            list.retain(|l| l.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for l in listeners {
            l.apply(change, name);
        }
    }
}

/// Every connection's subscriber.
fn buses() -> MutexGuard<'static, Vec<Arc<Bus>>> {
    static BUSES: OnceLock<Mutex<Vec<Arc<Bus>>>> = OnceLock::new();
    BUSES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The subscriber of `conn`, made and started if needed.
fn bus_of(conn: &Arc<Conn>) -> Arc<Bus> {
    let bus = {
        let mut buses = buses();
        buses.retain(|b| b.conn.strong_count() > 0);
        match buses
            .iter()
            .find(|b| std::ptr::eq(b.conn.as_ptr(), Arc::as_ptr(conn)))
        {
            Some(b) => Arc::clone(b),
            None => {
                let b = Arc::new(Bus {
                    conn: Arc::downgrade(conn),
                    channels: Mutex::default(),
                    joined: Notify::new(),
                    started: Default::default(),
                    log: LogThrottle::new(LOG_EVERY),
                });
                buses.push(Arc::clone(&b));
                b
            }
        }
    };
    bus.start();
    bus
}

/// Subscribes `listener` (a store on `conn` with `prefix`) to the other
/// stores' changes.
pub(crate) fn join(conn: &Arc<Conn>, prefix: &str, listener: Weak<dyn Listener>) {
    let bus = bus_of(conn);
    let mut channels = bus.channels();
    let list = channels.entry(channel(prefix)).or_default();
    let new = list.is_empty();
    list.retain(|l| l.strong_count() > 0);
    list.push(listener);
    drop(channels);
    if new {
        bus.joined.notify_one();
    }
}

/// Tells every store with `prefix` of `change` to `name` (a `PUBLISH`
/// within `timeout`). A failure is counted and logged, not returned: the
/// change itself is made, and other instances see it within a second.
pub(crate) async fn publish(
    conn: &Arc<Conn>,
    prefix: &str,
    change: Change,
    name: &str,
    timeout: Duration,
) {
    let bus = bus_of(conn);
    let work = async {
        let (mut c, _) = conn.get(timeout).await?;
        redis::cmd("PUBLISH")
            .arg(channel(prefix))
            .arg(change.encode(name))
            .query_async::<i64>(&mut c)
            .await
            .map_err(|e| Failure::redis(&e))
    };
    let failure = match tokio::time::timeout(timeout, work).await {
        Ok(Ok(_)) => return,
        Ok(Err(f)) => f,
        Err(_) => Failure::new(Kind::Timeout, format!("no answer within {timeout:?}")),
    };
    bus.failed(Stage::Publish, &failure);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_back() {
        for change in [Change::Reset, Change::Unban, Change::Ban { ms: 3_600_000 }] {
            for name in ["10.0.0.1", "#0123abcd", "10.0.0.7|POST /search"] {
                let m = change.encode(name);
                assert_eq!(Change::decode(&m), Some((change, name)));
            }
        }
    }

    #[test]
    fn anything_else_is_ignored() {
        for m in [
            "",
            "r",
            "r ",
            "x k",
            "b k",
            "b -1 k",
            "b 1",
            "b 99999999999999999999 k",
        ] {
            assert_eq!(Change::decode(m), None, "{m:?}");
        }
        assert_eq!(
            Change::decode(&format!("r {}", "k".repeat(MAX_MESSAGE))),
            None
        );
    }
}
