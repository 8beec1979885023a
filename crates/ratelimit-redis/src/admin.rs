//! A store's admin calls on one key: reset, ban, unban, and what is left
//! of a ban; each forgets the key here (deny cache, lease, fallback) and
//! then acts in Redis, and tells the other stores sharing it
//! (`invalidation`; their side is `listen.rs`).

use crate::connect::time_source::TimeSource;
use crate::fleet::invalidation::Change;
use crate::inner::Inner;
use crate::outage::failure::{Failure, Kind};
use crate::scripts::script::Op;
use ratelimit_core::StoreError;
use std::time::Duration;

/// A ban key's fields of a ban (`lua/ban.lua`).
const BAN_FIELDS: [&str; 4] = ["us", "un", "k", "fs"];
/// A ban key's fields of a written-back denial (`lua/ban.lua`).
const HOLD_FIELDS: [&str; 3] = ["hs", "hn", "hp"];

impl Inner {
    /// Forgets `name` in the deny cache and a denial this store holds of
    /// it (see `write_back`; a ban held stays: only an unban lifts it)
    /// and, with `lease`, its lease.
    fn forget_here(&self, name: &str, lease: bool) {
        if let Some(cache) = &self.deny {
            cache.forget(name);
        }
        self.write_back.held.forget_denial(name);
        if let Some(leases) = self.leases.as_ref().filter(|_| lease) {
            leases.forget(name);
        }
    }

    /// Forgets `name`'s state: its entries in the deny cache, the leases
    /// and the fallback, then its Redis keys (one per limit) deleted in one
    /// `DEL` and a written-back denial in its ban key (`HDEL`), in one
    /// round trip (they share a hash slot).
    pub(crate) async fn reset(&self, name: String) -> Result<(), StoreError> {
        self.forget_here(&name, true);
        if let Some(memory) = &self.policy.fallback {
            memory.reset(&name);
        }
        let script = &self.script;
        let keys: Vec<String> = script
            .parts
            .iter()
            .map(|p| script.redis_key(&name, p))
            .collect();
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(keys).ignore();
        pipe.cmd("HDEL")
            .arg(script.ban_key(&name))
            .arg(&HOLD_FIELDS[..])
            .ignore();
        self.command(pipe).await?;
        // A lease taken by a check in flight during the `DEL` was taken
        // from the deleted state: not recorded.
        self.forget_here(&name, true);
        self.publish(Change::Reset, &name).await;
        Ok(())
    }

    /// Bans `name` for `ms` from now (Redis's time, or the caller's
    /// `now`), forgetting its deny-cache entry and lease here, before and
    /// again once Redis has the ban (a lease taken by a check in flight
    /// meanwhile is then not recorded: see `lease`); in the fallback too.
    pub(crate) async fn ban(&self, name: String, ms: u64, now: u64) -> Result<(), StoreError> {
        self.forget_here(&name, true);
        if let Some(memory) = &self.policy.fallback {
            memory.ban(&name, Duration::from_millis(ms), now);
        }
        // Read before Redis bans: the end held is no later than Redis's.
        let local = self.local_now(now);
        match self.guarded(&name, ms, now, Op::Ban).await {
            Ok(_) => {
                self.forget_here(&name, true);
                let until = local.saturating_add(ms.saturating_mul(1_000_000));
                self.write_back.held.record(&name, local, until, 0, true);
                self.publish(Change::Ban { ms }, &name).await;
                Ok(())
            }
            Err(failure) => {
                self.policy.report(&failure);
                Err(failure.to_store_error())
            }
        }
    }

    /// Lifts `name`'s ban: the ban's fields of its ban key deleted (a
    /// written-back denial stays: what the key used stays used), its
    /// deny-cache entry here forgotten; in the fallback too.
    pub(crate) async fn unban(&self, name: String) -> Result<(), StoreError> {
        self.forget_here(&name, false);
        self.write_back.held.forget(&name);
        if let Some(memory) = &self.policy.fallback {
            memory.unban(&name);
        }
        let mut pipe = redis::pipe();
        pipe.cmd("HDEL")
            .arg(self.script.ban_key(&name))
            .arg(&BAN_FIELDS[..])
            .ignore();
        self.command(pipe).await?;
        // Again once Redis has it: a check in flight meanwhile, denied by
        // the ban, is not remembered (see `deny_cache`).
        if let Some(cache) = &self.deny {
            cache.forget(&name);
        }
        self.publish(Change::Unban, &name).await;
        Ok(())
    }

    /// What is left of `name`'s ban at `now` (the caller's time with
    /// [`TimeSource::Caller`], else Redis's), read with its time in one
    /// round trip.
    pub(crate) async fn ban_left(
        &self,
        name: String,
        now: u64,
    ) -> Result<Option<Duration>, StoreError> {
        let (mut c, _) = self
            .conn
            .get(self.timeout)
            .await
            .map_err(|f| f.to_store_error())?;
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(self.script.ban_key(&name))
            .arg("us")
            .arg("un");
        pipe.cmd("TIME");
        let work = pipe.query_async::<(Vec<Option<String>>, (String, String))>(&mut c);
        let (until, (s, us)) = match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(Failure::redis(&e).to_store_error()),
            Err(_) => return Err(self.timed_out()),
        };
        let num = |t: &str| t.trim().parse::<f64>().map_or(0, |f| f.max(0.0) as u128);
        let now = match self.script.time {
            TimeSource::Caller => u128::from(now),
            TimeSource::Redis => num(&s) * 1_000_000_000 + num(&us) * 1_000,
        };
        let [Some(until_s), Some(until_ns)] = until.as_slice() else {
            return Ok(None);
        };
        let until = num(until_s) * 1_000_000_000 + num(until_ns);
        Ok((until > now)
            .then(|| Duration::from_nanos(u64::try_from(until - now).unwrap_or(u64::MAX))))
    }

    /// Commands other than the script, in one round trip within the
    /// store's timeout.
    async fn command(&self, cmd: redis::Pipeline) -> Result<(), StoreError> {
        let (mut c, _) = self
            .conn
            .get(self.timeout)
            .await
            .map_err(|f| f.to_store_error())?;
        let work = cmd.query_async::<()>(&mut c);
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::redis(&e).to_store_error()),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// The error of a command Redis did not answer within the timeout.
    fn timed_out(&self) -> StoreError {
        Failure::new(
            Kind::Timeout,
            format!("no answer within {:?}", self.timeout),
        )
        .to_store_error()
    }
}
