//! The instances sharing a limit through Redis: each announces itself in a
//! sorted set and remembers how many it saw lately, the `k` its fallback
//! divides the limit by while Redis is away.

use redis::aio::ConnectionLike;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often an instance announces itself (and counts the others).
pub const INSTANCE_ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// How long an instance counts after it last announced itself.
pub const INSTANCE_SEEN_WITHIN: Duration = Duration::from_secs(10);

/// Whether a refused announcement was logged (once a process).
static WARNED: AtomicBool = AtomicBool::new(false);

/// The roster's script: announce, drop those not seen within the bound,
/// count (see `lua/roster.lua`).
const SCRIPT: &str = include_str!("../scripts/lua/roster.lua");

/// One roster: the stores deciding the same limits on the same keys, at
/// `{prefix}instances:{limits}`, and how many were seen lately.
#[derive(Debug)]
pub(crate) struct Roster {
    key: String,
    /// Instances seen at the last announcement (0: none yet).
    seen: AtomicU64,
}

impl Roster {
    /// The instances seen at the last announcement that Redis answered,
    /// this one included: 1 until then.
    pub(crate) fn instances(&self) -> u64 {
        self.seen.load(Ordering::Relaxed).max(1)
    }
}

/// The rosters of one connection's stores, announced under one random
/// instance id (not a secret: it names nothing but the connection).
#[derive(Debug)]
pub(crate) struct Rosters {
    id: String,
    all: Mutex<Vec<Arc<Roster>>>,
    started: AtomicBool,
}

impl Rosters {
    pub(crate) fn new() -> Self {
        let bytes = crate::fleet::key_secret::random();
        let id = bytes[..8].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            id,
            all: Mutex::default(),
            started: AtomicBool::new(false),
        }
    }

    /// The roster at `key`, joined once however many stores ask.
    pub(crate) fn join(&self, key: String) -> Arc<Roster> {
        let mut all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = all.iter().find(|r| r.key == key) {
            return Arc::clone(r);
        }
        let roster = Arc::new(Roster {
            key,
            seen: AtomicU64::new(0),
        });
        all.push(Arc::clone(&roster));
        roster
    }

    /// Whether announcing should start now: there is a roster, and it has
    /// not started yet (true once).
    pub(crate) fn start(&self) -> bool {
        let any = !self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        any && !self.started.swap(true, Ordering::AcqRel)
    }

    /// Announces this instance in every roster, each call bounded by
    /// `wait`; a roster Redis does not answer for keeps its last count.
    pub(crate) async fn announce(&self, c: &mut (impl ConnectionLike + Send), wait: Duration) {
        let all: Vec<Arc<Roster>> = self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let within = u64::try_from(INSTANCE_SEEN_WITHIN.as_millis()).unwrap_or(u64::MAX);
        for roster in all {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(SCRIPT)
                .arg(1)
                .arg(&roster.key)
                .arg(&self.id)
                .arg(within);
            match tokio::time::timeout(wait, cmd.query_async::<u64>(c)).await {
                Ok(Ok(n)) => roster.seen.store(n, Ordering::Relaxed),
                Ok(Err(e)) if !e.is_io_error() && !WARNED.swap(true, Ordering::Relaxed) => {
                    // Refused (an ACL without EVAL, say): said once a
                    // process.
                    tracing::warn!(
                        target: "ratelimit_redis",
                        error = %e,
                        key = %roster.key,
                        "instances not counted through redis: while it is away, the fallback admits the whole limit"
                    );
                }
                Ok(Err(e)) => {
                    tracing::debug!(target: "ratelimit_redis", error = %e, "roster not announced");
                }
                Err(_) => {
                    tracing::debug!(target: "ratelimit_redis", "roster not announced in time");
                }
            }
        }
    }
}
