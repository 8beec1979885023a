//! Bans and denials written back to a Redis that lost its data (a restart
//! without persistence, a `FLUSHALL`, a failover to an empty replica), as
//! the key secret is.
//!
//! Each store keeps, in `held`, its keys' standing bans and denials with
//! the instant each ends. It notices a loss by a marker: `{prefix}epoch`,
//! a random value the first store to find it gone writes (`SET NX`), read
//! back by every store. A store that reads another value than the one it
//! read last writes back every key it holds, in one script call per key
//! (`lua/ban.lua`, ops `w` and `hP`): a ban for what is left of it, a
//! denial as a refusal by its limit until its known instant. A write-back
//! only moves an end later, so two stores writing back the same ban leave
//! it as the later of their two ends had it (each within a round trip of
//! the ban's real end with Redis's clock, exactly it with the caller's),
//! and never count it twice.
//!
//! When: at [`maintain`](ratelimit_core::Store::maintain), at most every
//! [`WRITE_BACK_EVERY`]; and at once (at most every [`REACT_EVERY`]) when
//! Redis admits a check of a key this store holds as refused, the sign of
//! a loss. The work is bounded: at most `HELD_KEYS` calls, [`IN_FLIGHT`]
//! at a time, in a task, never on the request path. Every failure goes
//! through the failure policy's report (logged, counted in
//! `ratelimit_redis_errors_total`); a write-back with failures is tried
//! again whole at the next turn (idempotent). With `metrics`, each key's
//! outcome is counted in `ratelimit_redis_write_back_total{result}`
//! (`written`, `held`: Redis already refused it that long, `failed`), and
//! each loss seen in `ratelimit_redis_losses_total`; a loss is logged
//! (`warn` when the store holds keys, else `info`).

use crate::inner::Inner;
use crate::outage::failure::{Failure, Kind};
use crate::scripts::script::Op;
use ratelimit_core::{Decision, StoreError};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// What ends the marker key's name, after the store's prefix.
pub(crate) const EPOCH_SUFFIX: &str = "epoch";

/// How often [`maintain`](ratelimit_core::Store::maintain) reads the
/// marker.
pub const WRITE_BACK_EVERY: Duration = Duration::from_secs(1);

/// How often, at most, an admission of a held key reads the marker.
pub(crate) const REACT_EVERY: Duration = Duration::from_millis(100);

/// Write-back calls in flight at once.
const IN_FLIGHT: usize = 32;

/// The longest span written back, ns (the scripts keep numbers below
/// 2^53).
const MAX_SPAN: u64 = 1 << 52;

/// What a write-back did.
#[derive(Default)]
struct Tally {
    written: usize,
    held: usize,
    failed: usize,
}

impl Inner {
    /// Remembers that Redis refuses `name` (by limit `part`, or banned)
    /// for `wait` from `local` (the store's local clock, read before
    /// Redis decided).
    pub(crate) fn hold(
        &self,
        name: &str,
        local: u64,
        wait: Option<Duration>,
        part: usize,
        banned: bool,
    ) {
        let Some(wait) = wait.and_then(|w| u64::try_from(w.as_nanos()).ok()) else {
            return;
        };
        let part = if banned { 0 } else { part };
        let until = local.saturating_add(wait);
        self.write_back
            .held
            .record(name, local, until, part, banned);
    }

    /// Holds what Redis's answer `v`, decided as `d` by limit `part`,
    /// tells of `name`: a ban until it ends; a key left nothing
    /// (`remaining` 0, admitted or denied) until one more unit is back
    /// (`d.next`: a cost-1 check is denied before, by the limit with the
    /// latest). A key with units left is not held, whatever the request's
    /// cost: a cost-1 check of it would be admitted.
    pub(crate) fn hold_answer(&self, name: &str, local: u64, v: &[i64], d: &Decision, part: usize) {
        if d.banned {
            return self.hold(name, local, d.wait, 0, true);
        }
        if d.remaining > 0 || d.next.is_zero() {
            return;
        }
        let part = match d.allowed {
            false => part,
            true => (0..v.len() / 5)
                .max_by_key(|&i| self.script.part_decision(v, i).next)
                .unwrap_or(0),
        };
        self.hold(name, local, Some(d.next), part, false);
    }

    /// After Redis admitted a check of `name` at `local`: if this store
    /// holds it as refused, Redis may have lost its data, and the marker
    /// is read at once (in a task).
    pub(crate) fn admitted(self: &Arc<Self>, name: &str, now: u64, local: u64) {
        if !self.write_back.held.holds(name, local) || !self.write_back.due(REACT_EVERY) {
            return;
        }
        self.spawn_write_back(now);
    }

    /// Reads the marker and writes back in a task (the caller marked it
    /// due).
    pub(crate) fn spawn_write_back(self: &Arc<Self>, now: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = Arc::clone(self);
        runtime.spawn(async move {
            let _ = inner.write_back(now).await;
        });
    }

    /// Reads the marker (writing a fresh one if gone) and, when it is not
    /// the one read last (or a write-back after a loss failed), writes
    /// back every key held; returns how many were written.
    pub(crate) async fn write_back(&self, now: u64) -> Result<usize, StoreError> {
        let wb = &self.write_back;
        if wb.running.swap(true, Ordering::AcqRel) {
            return Ok(0);
        }
        let result = self.write_back_running(now).await;
        wb.running.store(false, Ordering::Release);
        result
    }

    async fn write_back_running(&self, now: u64) -> Result<usize, StoreError> {
        let marker = self.read_marker().await.map_err(|f| {
            self.policy.report(&f);
            f.to_store_error()
        })?;
        let wb = &self.write_back;
        let last = wb
            .epoch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(marker.clone());
        // The first read is the reference.
        let Some(last) = last else { return Ok(0) };
        let local = self.local_now(now);
        let standing = wb.held.standing(local);
        if last != marker {
            #[cfg(feature = "metrics")]
            metrics::counter!("ratelimit_redis_losses_total", "limit" => self.label).increment(1);
            let message = "redis lost its data (its epoch marker changed): writing back the keys this store holds as refused";
            match standing.len() {
                0 => tracing::info!(target: "ratelimit_redis", keys = 0, "{message}"),
                keys => tracing::warn!(target: "ratelimit_redis", keys, "{message}"),
            }
            wb.owed.store(true, Ordering::Release);
        }
        if !wb.owed.load(Ordering::Acquire) {
            return Ok(0);
        }
        let tally = self.write_all(standing, now, local).await;
        #[cfg(feature = "metrics")]
        for (result, n) in [
            ("written", tally.written),
            ("held", tally.held),
            ("failed", tally.failed),
        ] {
            metrics::counter!("ratelimit_redis_write_back_total", "limit" => self.label, "result" => result)
                .increment(n as u64);
        }
        if tally.failed > 0 {
            tracing::warn!(
                target: "ratelimit_redis",
                failed = tally.failed,
                written = tally.written,
                "some bans and denials were not written back; tried again at the next turn"
            );
            return Err(Failure::new(
                Kind::Other,
                format!("{} of the keys held not written back", tally.failed),
            )
            .to_store_error());
        }
        wb.owed.store(false, Ordering::Release);
        Ok(tally.written)
    }

    /// Writes `standing` back, [`IN_FLIGHT`] calls at a time.
    async fn write_all(
        &self,
        standing: Vec<crate::fleet::held::Standing>,
        now: u64,
        local: u64,
    ) -> Tally {
        let mut tally = Tally::default();
        for batch in standing.chunks(IN_FLIGHT) {
            let calls = batch.iter().map(|s| {
                let span = s.until.saturating_sub(local).min(MAX_SPAN);
                let op = Op::WriteBack {
                    banned: s.banned,
                    part: u8::try_from(s.part).unwrap_or(u8::MAX),
                };
                self.guarded(&s.name, span, now, op)
            });
            for result in join_all(calls).await {
                match result {
                    Ok(v) if v[0] == 1 => tally.written += 1,
                    Ok(_) => tally.held += 1,
                    Err(failure) => {
                        self.policy.report(&failure);
                        tally.failed += 1;
                    }
                }
            }
        }
        tally
    }

    /// The marker, written first if gone: `SET NX` of a fresh random
    /// value, then `GET`, in one round trip.
    async fn read_marker(&self) -> Result<String, Failure> {
        let key = format!("{}{EPOCH_SUFFIX}", self.script.prefix);
        let fresh = crate::fleet::key_secret::to_hex(&crate::fleet::key_secret::random());
        let (mut c, generation) = self.conn.get(self.timeout).await?;
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(&key).arg(fresh).arg("NX").ignore();
        pipe.cmd("GET").arg(&key);
        let work = pipe.query_async::<(Option<String>,)>(&mut c);
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok((Some(marker),))) => Ok(marker),
            Ok(Ok((None,))) => Err(Failure::new(Kind::Reply, "the epoch marker was not kept")),
            Ok(Err(e)) => {
                if e.is_unrecoverable_error() || e.is_io_error() {
                    self.conn.invalidate(generation);
                }
                Err(Failure::redis(&e))
            }
            Err(_) => Err(Failure::new(
                Kind::Timeout,
                format!("no answer within {:?}", self.timeout),
            )),
        }
    }
}

/// Runs `futures` concurrently, their outputs in order.
async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<_> = futures.map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, result) in pending.iter_mut().zip(out.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
