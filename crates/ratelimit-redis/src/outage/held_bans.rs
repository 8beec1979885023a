//! The bans an instance holds, refused by its fallback while Redis gives
//! no decisions.
//!
//! A ban Redis makes on a denial lives in Redis; the instance that saw it
//! (made it, was answered it, or was told of it) holds it with its end
//! (`fleet::held`, kept for the write-back after a data loss). When a
//! check falls back to memory, the ban held for its key is copied into the
//! fallback's memory first, so the fallback refuses the key to the ban's
//! end as Redis would. An instance that holds no ban of the key (it never
//! saw one) falls back on the algorithm alone.

use crate::inner::Inner;
use crate::outage::failure::Failure;
use ratelimit_core::{Decision, StoreError};
use std::time::Duration;

impl Inner {
    /// The failure policy's answer to a check of `name` that Redis did not
    /// decide, with the ban this store holds of it (if any) in force.
    pub(crate) fn fall_back(
        &self,
        failure: &Failure,
        name: &str,
        cost: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        if let Some(memory) = &self.policy.fallback {
            let local = self.local_now(now);
            if let Some(until) = self.write_back.held.ban_until(name, local) {
                memory.ban(name, Duration::from_nanos(until - local), now);
            }
        }
        self.policy.check(failure, name, cost, now)
    }
}
