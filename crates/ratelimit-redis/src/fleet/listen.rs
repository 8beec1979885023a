//! A store's side of `invalidation`: it joins its connection's subscriber,
//! publishes its own admin changes, and applies other stores' changes to
//! what it holds locally (deny cache, leases, fallback).

use crate::connect::time_source::TimeSource;
use crate::fleet::invalidation::{self, Change, Listener};
use crate::inner::Inner;
use ratelimit_core::{Algorithm, Decision};
use std::time::Duration;

impl Inner {
    /// Tells every store sharing the Redis and prefix of `change` to
    /// `name` (see `invalidation`).
    pub(crate) async fn publish(&self, change: Change, name: &str) {
        let prefix = &self.script.prefix;
        invalidation::publish(&self.conn, prefix, change, name, self.timeout).await;
    }
}

impl Listener for Inner {
    /// Another store's change of `name`: its cached denial and lease
    /// forgotten here (a denial this store holds of it, see
    /// `write_back`, on a reset; a ban too on an unban), a ban remembered as a
    /// standing denial and held (on the
    /// local clock; with [`TimeSource::Caller`] the caller's clock is not
    /// at hand, and the next check asks Redis) and in the fallback (at
    /// its next use).
    fn apply(&self, change: Change, name: &str) {
        if let Some(cache) = &self.deny {
            cache.forget(name);
        }
        match change {
            Change::Reset => {
                self.write_back.held.forget_denial(name);
                if let Some(leases) = &self.leases {
                    leases.forget(name);
                }
                if let Some(memory) = &self.policy.fallback {
                    memory.reset(name);
                }
            }
            Change::Unban => {
                self.write_back.held.forget(name);
                if let Some(memory) = &self.policy.fallback {
                    memory.unban(name);
                }
            }
            Change::Ban { ms } => {
                if let Some(leases) = &self.leases {
                    leases.forget(name);
                }
                // So that a check Redis does not answer here (a timeout,
                // an outage) is refused too.
                if let Some(memory) = &self.policy.fallback {
                    memory.ban_later(name, Duration::from_millis(ms));
                }
                if self.script.time == TimeSource::Redis {
                    let a = &self.script.parts[0].algorithm;
                    let ban = Decision::ban(a.limit(), a.window(), Duration::from_millis(ms));
                    let local = self.local_now(0);
                    // A ban this store made, or already had from Redis,
                    // is held with the end it knows (this one ends the
                    // message's delivery later).
                    if !self.write_back.held.holds(name, local) {
                        self.hold(name, local, ban.wait, 0, true);
                    }
                    if let Some(cache) = &self.deny {
                        cache.remember(cache.ticket(name), local, &ban, 0);
                    }
                }
            }
        }
    }
}
