//! Bans: a key denied for a while after its limit denied it, whatever the
//! algorithm says, kept per shard in a table bounded by the store's cap.

use crate::plumbing::saturating_nanos;
use crate::ConfigError;
use hashbrown::HashTable;
use std::time::Duration;

/// Occupied buckets looked at to pick a ban to drop when a shard's table
/// of bans is full.
const SAMPLE: usize = 8;

/// What a denial costs a key: a ban of `duration`, each repeat offence
/// within `forgive` of the previous ban's end multiplied by `escalate`, up
/// to `max`.
///
/// ```
/// use ratelimit_core::BanPolicy;
/// use std::time::Duration;
///
/// let hour = Duration::from_secs(3600);
/// let ban = BanPolicy::new(hour)?.escalate(2.0, hour * 24, hour * 24)?;
/// assert_eq!(ban.duration_for(0), hour);
/// assert_eq!(ban.duration_for(3), hour * 8);
/// assert_eq!(ban.duration_for(9), hour * 24);
/// # Ok::<(), ratelimit_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BanPolicy {
    duration: Duration,
    escalate: f64,
    max: Duration,
    forgive: Duration,
}

impl BanPolicy {
    /// A ban of `duration` (1 ms to 1 year) on every denial, without
    /// escalation.
    pub fn new(duration: Duration) -> Result<Self, ConfigError> {
        if duration < Duration::from_millis(1) || duration > Duration::from_secs(366 * 86_400) {
            return Err(ConfigError::BadBan(format!(
                "ban {duration:?}: expected 1ms to 366d"
            )));
        }
        Ok(Self {
            duration,
            escalate: 1.0,
            max: duration,
            forgive: Duration::ZERO,
        })
    }

    /// Each repeat offence (a new ban within `forgive` of the end of the
    /// previous one) multiplies the ban by `factor` (1 to 100), up to
    /// `max` (at least the ban); after `forgive` without a ban the key
    /// starts over.
    pub fn escalate(
        mut self,
        factor: f64,
        max: Duration,
        forgive: Duration,
    ) -> Result<Self, ConfigError> {
        if !(1.0..=100.0).contains(&factor) {
            return Err(ConfigError::BadBan(format!(
                "ban-escalate {factor}: expected 1 to 100"
            )));
        }
        if max < self.duration || max > Duration::from_secs(366 * 86_400) {
            return Err(ConfigError::BadBan(format!(
                "ban-max {max:?}: expected the ban ({:?}) to 366d",
                self.duration
            )));
        }
        self.escalate = factor;
        self.max = max;
        self.forgive = forgive;
        Ok(self)
    }

    /// The ban's base duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The factor of each repeat offence (1: none).
    pub fn factor(&self) -> f64 {
        self.escalate
    }

    /// The longest ban.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// How long after a ban ends its offences are remembered.
    pub fn forgive(&self) -> Duration {
        self.forgive
    }

    /// The ban after `strikes` earlier offences still remembered.
    pub fn duration_for(&self, strikes: u32) -> Duration {
        let factor = self.escalate.powi(strikes.min(1024) as i32);
        let secs = self.duration.as_secs_f64() * factor;
        if !secs.is_finite() || secs >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::from_secs_f64(secs).min(self.max)
    }
}

/// One key's ban.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The key's seeded hash.
    hash: u64,
    /// When the ban ends (ns of the store's clock).
    until: u64,
    /// When its offences are forgotten (and the entry may go).
    forget_at: u64,
    /// Earlier offences still remembered.
    strikes: u32,
}

/// One shard's bans, by key hash (keys are told apart by their 64-bit
/// seeded hash, as the deny cache does), at most `cap` of them.
#[derive(Debug)]
pub(super) struct Bans {
    table: HashTable<Entry>,
    cap: usize,
    cursor: usize,
}

impl Bans {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            table: HashTable::new(),
            cap: cap.max(1),
            cursor: 0,
        }
    }

    /// The time left of the ban of the key hashed `hash` at `now`, if one
    /// stands.
    #[inline]
    pub(super) fn active(&self, hash: u64, now: u64) -> Option<u64> {
        let e = self.table.find(hash, |e| e.hash == hash)?;
        (e.until > now).then(|| e.until - now)
    }

    /// Bans the key hashed `hash` at `now` for an offence under `policy`
    /// (escalated if it offended before and is not forgiven yet); returns
    /// the ban's length in ns.
    pub(super) fn offend(&mut self, hash: u64, now: u64, policy: &BanPolicy) -> u64 {
        let strikes = match self.table.find(hash, |e| e.hash == hash) {
            Some(e) if now < e.forget_at => e.strikes.saturating_add(1),
            _ => 0,
        };
        let length = saturating_nanos(policy.duration_for(strikes));
        let until = now.saturating_add(length);
        let forget_at = until.saturating_add(saturating_nanos(policy.forgive));
        self.put(Entry {
            hash,
            until,
            forget_at,
            strikes,
        });
        length
    }

    /// Bans the key hashed `hash` until `until` (a ban by code).
    pub(super) fn set(&mut self, hash: u64, until: u64) {
        let strikes = self
            .table
            .find(hash, |e| e.hash == hash)
            .map_or(0, |e| e.strikes);
        self.put(Entry {
            hash,
            until,
            forget_at: until,
            strikes,
        });
    }

    /// Lifts the ban of the key hashed `hash`, and forgets its offences.
    pub(super) fn lift(&mut self, hash: u64) {
        if let Ok(e) = self.table.find_entry(hash, |e| e.hash == hash) {
            e.remove();
        }
    }

    /// Drops, in one bounded step from a cursor, the entries forgotten by
    /// `now`.
    pub(super) fn sweep_step(&mut self, now: u64, buckets: usize) {
        let n = self.table.num_buckets();
        if n == 0 {
            return;
        }
        let mut i = self.cursor % n;
        for _ in 0..buckets.min(n) {
            if let Ok(e) = self.table.get_bucket_entry(i) {
                if e.get().forget_at <= now {
                    e.remove();
                }
            }
            i = (i + 1) % n;
        }
        self.cursor = i;
    }

    /// Whether no ban is held.
    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    fn put(&mut self, entry: Entry) {
        let hash = entry.hash;
        match self.table.find_mut(hash, |e| e.hash == hash) {
            Some(e) => *e = entry,
            None => {
                if self.table.len() >= self.cap {
                    self.drop_one(entry.until);
                }
                self.table.insert_unique(hash, entry, |e| e.hash);
            }
        }
    }

    /// Makes room at the cap: of a few sampled entries, drops the one
    /// forgotten soonest (a ban over, if any). A ban dropped early errs
    /// toward admitting, within the algorithm's limit, which still holds.
    fn drop_one(&mut self, seed: u64) {
        let n = self.table.num_buckets();
        let mut best: Option<(usize, u64)> = None;
        let mut seen = 0;
        for step in 0..n {
            let i = (seed as usize).wrapping_add(step) & (n - 1);
            if let Some(e) = self.table.get_bucket(i) {
                if best.is_none_or(|(_, f)| e.forget_at < f) {
                    best = Some((i, e.forget_at));
                }
                seen += 1;
                if seen == SAMPLE {
                    break;
                }
            }
        }
        if let Some((i, _)) = best {
            if let Ok(e) = self.table.get_bucket_entry(i) {
                e.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offences_escalate_and_are_forgiven() {
        let s = |n: u64| Duration::from_secs(n);
        let policy = BanPolicy::new(s(10))
            .unwrap()
            .escalate(2.0, s(35), s(100))
            .unwrap();
        let mut bans = Bans::new(4);
        let sec = 1_000_000_000;
        assert_eq!(bans.offend(1, 0, &policy), 10 * sec);
        assert_eq!(bans.active(1, 5 * sec), Some(5 * sec));
        assert_eq!(bans.active(1, 10 * sec), None);
        assert_eq!(bans.offend(1, 20 * sec, &policy), 20 * sec);
        assert_eq!(bans.offend(1, 50 * sec, &policy), 35 * sec);
        // 100 s after the last ban's end (85 s): forgiven.
        assert_eq!(bans.offend(1, 186 * sec, &policy), 10 * sec);
        bans.lift(1);
        assert_eq!(bans.active(1, 186 * sec), None);
    }

    #[test]
    fn the_table_is_capped() {
        let policy = BanPolicy::new(Duration::from_secs(1)).unwrap();
        let mut bans = Bans::new(3);
        for h in 1..100u64 {
            bans.offend(h.wrapping_mul(0x9E37_79B9_7F4A_7C15), h, &policy);
            assert!(bans.table.len() <= 3);
        }
        bans.sweep_step(u64::MAX, 1024);
        assert!(bans.is_empty());
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(BanPolicy::new(Duration::ZERO).is_err());
        let b = BanPolicy::new(Duration::from_secs(5)).unwrap();
        assert!(b
            .escalate(0.5, Duration::from_secs(9), Duration::ZERO)
            .is_err());
        assert!(b
            .escalate(2.0, Duration::from_secs(1), Duration::ZERO)
            .is_err());
    }
}
