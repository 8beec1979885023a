//! A store's wire protocol: its one script, the keys and arguments of a
//! call, the one invocation of it, the well-formedness of its replies, and
//! the decisions they give.

use crate::connect::conn::{Conn, Handle, ScriptSlot};
use crate::connect::time_source::TimeSource;
use crate::outage::failure::{Failure, Kind};
use crate::scripts::args::{BanArgs, CallArgs, CommonArgs, OpArg, Params};
use crate::scripts::combine::combine;
use crate::scripts::plan::{key_phase, multi_source, Plan};
use ratelimit_core::{Algorithm, AnyAlgorithm, Decision};
use std::sync::Arc;
use std::time::Duration;

/// Extra lifetime of a key past the moment its state is full again, so
/// that a key never vanishes early.
const TTL_SLACK_MS: u64 = 1_000;
/// Ages above this are clamped (the scripts keep numbers below 2^53).
const MAX_AGE: u64 = 1 << 52;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// One limit of a store: its algorithm and how Redis runs it.
pub(crate) struct Part {
    pub(crate) algorithm: AnyAlgorithm,
    pub(crate) plan: Plan,
}

/// What a call of the script does.
pub(crate) enum Op {
    Check,
    Refund {
        admitted_at: u64,
    },
    /// A ban of `cost` ms from now.
    Ban,
    /// A settlement: up charges `cost` whatever is left, down refunds it
    /// as admitted at `admitted_at`; both answer a peek.
    Settle {
        admitted_at: u64,
        up: bool,
    },
    /// A write-back (see `write_back`): the key refused for `cost` ns
    /// more, banned or denied by limit `part`.
    WriteBack {
        banned: bool,
        part: u8,
    },
}

impl Op {
    /// The refund's admission time and the caller's `now`, if the op
    /// takes some back, and the op as the script reads it.
    fn wire(&self, now: u64) -> (Option<(u64, u64)>, OpArg) {
        match self {
            Op::Check => (None, OpArg::Check),
            Op::Refund { admitted_at } => (Some((*admitted_at, now)), OpArg::Refund),
            Op::Ban => (None, OpArg::Ban),
            Op::Settle { up: true, .. } => (None, OpArg::SettleUp),
            Op::Settle { admitted_at, .. } => (Some((*admitted_at, now)), OpArg::SettleDown),
            Op::WriteBack { banned: true, .. } => (None, OpArg::WriteBan),
            Op::WriteBack { part, .. } => (None, OpArg::WriteDenial(*part)),
        }
    }
}

/// The script of a store's limits, on its connection: everything a call
/// sends, and how its reply is read.
pub(crate) struct Script {
    pub(crate) conn: Arc<Conn>,
    pub(crate) slot: Arc<ScriptSlot>,
    /// The limits, checked in this order (one, usually).
    pub(crate) parts: Box<[Part]>,
    pub(crate) prefix: String,
    pub(crate) time: TimeSource,
    /// The ban settings every call sends.
    pub(crate) ban: BanArgs,
}

/// The source of the script running `parts`: each limit's own script (or
/// several, under `lua/multi.lua`) inside `lua/ban.lua`, without comments.
pub(crate) fn source(parts: &[Part]) -> String {
    let source = match parts {
        [one] => one.plan.source.clone(),
        _ => multi_source(parts.iter().map(|p| &p.plan)),
    };
    let wrapped = include_str!("lua/ban.lua").replacen("\n--@inner\n", &format!("\n{source}\n"), 1);
    without_comments(&wrapped)
}

/// `src` without its whole-line comments: every byte of a script is sent
/// at each load, and Redis refuses a bulk of over 16 KiB before `AUTH`
/// (so a store without the password learns `NOAUTH`, not a protocol
/// error). The scripts have no block comments and no multi-line strings.
fn without_comments(src: &str) -> String {
    src.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Script {
    /// The Redis key of `key`'s state for `part`.
    pub(crate) fn redis_key(&self, key: &str, part: &Part) -> String {
        format!("{}{{{key}}}:{}", self.prefix, part.plan.tag)
    }

    /// The Redis key of `key`'s ban (in the slot of its states).
    pub(crate) fn ban_key(&self, key: &str) -> String {
        format!("{}{{{key}}}:ban", self.prefix)
    }

    /// The script's arguments for `op` on `key` (see [`CallArgs`]),
    /// at `now` (`None`: the server's time): written straight into the
    /// command, numbers as numbers.
    pub(crate) fn args<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
        now: Option<u64>,
        refund: Option<(u64, u64)>,
        op: OpArg,
    ) -> CallArgs<impl Iterator<Item = (&'a Params, Option<u64>)> + Clone + 'a> {
        let (refund_s, refund_ns) = match (refund, now) {
            (Some((admitted_at, _)), Some(_)) => (
                Some(admitted_at / NANOS_PER_SEC),
                Some(admitted_at % NANOS_PER_SEC),
            ),
            (Some((admitted_at, caller_now)), None) => (
                Some(caller_now.saturating_sub(admitted_at).min(MAX_AGE)),
                None,
            ),
            (None, _) => (None, None),
        };
        CallArgs {
            common: CommonArgs {
                op,
                cost,
                now_s: now.map(|t| t / NANOS_PER_SEC),
                now_ns: now.map(|t| t % NANOS_PER_SEC),
                refund_s,
                refund_ns,
                ttl_slack_ms: TTL_SLACK_MS,
            },
            limits: self
                .parts
                .iter()
                .map(move |p| (&p.plan.params, key_phase(&p.algorithm, key))),
            multi: self.parts.len() > 1,
            ban: self.ban,
        }
    }

    /// One round trip on `conn`: the script on `key`'s state, its reply
    /// if well-formed. A broken connection is dropped.
    pub(crate) async fn call(
        &self,
        (mut conn, generation): (Handle, u64),
        key: &str,
        cost: u64,
        now: u64,
        op: &Op,
    ) -> Result<Vec<i64>, Failure> {
        let time = match self.time {
            TimeSource::Redis => None,
            TimeSource::Caller => Some(now),
        };
        let (refund, op_arg) = op.wire(now);
        let mut invocation = self.slot.script.prepare_invoke();
        for part in &*self.parts {
            invocation.key(self.redis_key(key, part));
        }
        invocation.key(self.ban_key(key));
        invocation.arg(self.args(key, cost, time, refund, op_arg));
        match invocation.invoke_async::<Vec<i64>>(&mut conn).await {
            Ok(v) if self.well_formed(&v, op_arg) => Ok(v),
            Ok(v) => Err(Failure::new(
                Kind::Reply,
                format!(
                    "unexpected script reply of {} numbers, starting {:?}",
                    v.len(),
                    &v[..v.len().min(4)]
                ),
            )),
            Err(e) => {
                if e.is_unrecoverable_error() || e.is_io_error() {
                    self.conn.invalidate(generation);
                }
                Err(Failure::redis(&e))
            }
        }
    }

    /// A script's reply: four numbers per limit run, every limit but the
    /// last admitting, and no more than the store's limits; all of them
    /// unless one denied.
    fn well_formed(&self, v: &[i64], op: OpArg) -> bool {
        match op {
            OpArg::Check => {}
            OpArg::Refund | OpArg::Ban | OpArg::WriteBan | OpArg::WriteDenial(_) => {
                return v.len() == 4 && (v[0] == 0 || v[0] == 1)
            }
            // Five numbers for every limit, each admitting or in debt.
            OpArg::SettleUp | OpArg::SettleDown => {
                return v.len() == 5 * self.parts.len()
                    && v.chunks(5).all(|r| r[0] == 0 || r[0] == 1)
            }
        }
        if v.len() == 5 && v[0] == 2 {
            return true; // banned
        }
        let runs = v.len() / 5;
        let flag = |i: usize| v[5 * i];
        v.len() % 5 == 0
            && (1..=self.parts.len()).contains(&runs)
            && (0..runs - 1).all(|i| flag(i) == 1)
            && (flag(runs - 1) == 1 || flag(runs - 1) == 0)
            && (runs == self.parts.len() || flag(runs - 1) == 0)
    }

    /// The decision of a well-formed reply, and the limit it comes from
    /// when denied (the last limit run).
    pub(crate) fn decision(&self, v: &[i64]) -> (Decision, usize) {
        if v[0] == 2 {
            let a = &self.parts[0].algorithm;
            return (Decision::ban(a.limit(), a.window(), nanos(v[2])), 0);
        }
        let one = |i: usize| self.part_decision(v, i);
        let last = v.len() / 5 - 1;
        let d = one(last);
        if !d.allowed || last == 0 {
            return (d, last);
        }
        (combine((0..=last).map(one).collect()), last)
    }

    /// Limit `i`'s decision in a reply: five numbers per limit, allowed,
    /// remaining, wait, reset, and the wait for one more unit.
    pub(crate) fn part_decision(&self, v: &[i64], i: usize) -> Decision {
        let (v, a) = (&v[5 * i..5 * i + 5], &self.parts[i].algorithm);
        Decision::new(
            v[0] == 1,
            u64::try_from(v[1]).unwrap_or(0),
            (v[2] >= 0).then(|| nanos(v[2])),
            a.limit(),
            a.window(),
            nanos(v[3]),
            nanos(v[4]),
        )
    }
}

/// A reply's count of nanoseconds (a negative one is none).
fn nanos(x: i64) -> Duration {
    Duration::from_nanos(u64::try_from(x).unwrap_or(0))
}
