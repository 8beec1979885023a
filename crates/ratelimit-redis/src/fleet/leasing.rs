//! A store's leases in its calls: a lease taken for a hot key, and the
//! unspent units given back (an expired or evicted lease, a release at
//! shutdown, a live store's change, the store dropped).

use crate::connect::time_source::TimeSource;
use crate::fleet::lease::{Leases, Unspent};
use crate::inner::Inner;
use crate::scripts::script::Op;
use ratelimit_core::{Decision, StoreError};
use std::sync::Arc;
use std::time::Duration;

impl Inner {
    /// A cost-1 check of a hot key taking a lease: of `size`; when fewer
    /// are left, a lease of what is left (`remaining`, if 2 or more); else
    /// `None`, and an ordinary check follows.
    pub(crate) async fn take_lease(
        self: &Arc<Self>,
        leases: &Leases,
        key: &str,
        now: u64,
        local: u64,
    ) -> Option<Result<Decision, StoreError>> {
        let mut size = leases.size;
        while size >= 2 {
            // Read before Redis decides: a reset or ban of the key seen
            // after that (here or through pub/sub) voids the lease.
            let forgets = leases.forgets(key);
            match self.guarded(key, size, now, Op::Check).await {
                Ok(v) => {
                    let (mut d, part) = self.script.decision(&v);
                    // Before the lease's units are added to `remaining`.
                    self.hold_answer(key, local, &v, &d, part);
                    if d.allowed {
                        let left = size - 1;
                        match leases.insert(key, (left, forgets), now, local, &d) {
                            Ok(replaced) => self.give_back(replaced, now),
                            // This request was in flight: admitted alone.
                            Err(_) => return Some(Ok(d)),
                        }
                        d.remaining = d.remaining.saturating_add(left);
                        if d.remaining > 0 {
                            d.next = Duration::ZERO;
                        }
                        return Some(Ok(d));
                    }
                    size = if d.remaining < size { d.remaining } else { 0 };
                }
                Err(failure) => return Some(self.fall_back(&failure, key, 1, now)),
            }
        }
        None
    }

    /// Gives a lease's unspent units back, in a task of its own (outside
    /// a tokio runtime, they stay taken until the key's state refills).
    pub(crate) fn give_back(self: &Arc<Self>, unspent: Option<Unspent>, now: u64) {
        let Some(u) = unspent else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "ratelimit_redis", units = u.units, "no tokio runtime: lease units not given back");
            return;
        };
        let inner = Arc::clone(self);
        runtime.spawn(async move {
            let _ = inner.refund(u.key, u.units, u.taken_at, now).await;
        });
    }

    /// Takes every lease's unspent units out, each with the caller's time
    /// now, estimated (see [`caller_now`](Self::caller_now)).
    pub(crate) fn drain_leases(&self) -> Vec<(Unspent, u64)> {
        let Some(leases) = &self.leases else {
            return Vec::new();
        };
        leases
            .drain_expired(u64::MAX)
            .into_iter()
            .map(|u| {
                let now = self.caller_now(&u);
                (u, now)
            })
            .collect()
    }

    /// The caller's time now, estimated for a lease's refund when no
    /// caller is at hand: its take's time plus the local time since.
    fn caller_now(&self, u: &Unspent) -> u64 {
        match self.script.time {
            TimeSource::Caller => u.taken_at,
            TimeSource::Redis => u
                .taken_at
                .saturating_add(self.local_now(0).saturating_sub(u.taken_local)),
        }
    }
}

impl Drop for Inner {
    /// Gives the leases' unspent units back, in a task on the current
    /// tokio runtime (none: they stay taken until the keys' states refill),
    /// each by the script's one invocation, within the store's timeout.
    fn drop(&mut self) {
        if self.leases.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for (u, now) in self.drain_leases() {
            let (script, timeout) = (Arc::clone(&self.script), self.timeout);
            runtime.spawn(async move {
                let work = async {
                    let conn = script.conn.get(timeout).await?;
                    let op = Op::Refund {
                        admitted_at: u.taken_at,
                    };
                    script.call(conn, &u.key, u.units, now, &op).await
                };
                let _ = tokio::time::timeout(timeout, work).await;
            });
        }
    }
}
