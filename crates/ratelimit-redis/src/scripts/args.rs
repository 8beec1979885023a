//! The scripts' arguments: one struct per script, whose fields, in
//! declaration order, are its `ARGV` entries.
//!
//! Every Lua script names its arguments in its header comment
//! (`-- ARGV[i]  name: ...`); the tests below check those lists against
//! each struct's [`FIELDS`](CommonArgs::FIELDS), which the macro derives
//! from the declaration itself. Numbers go to Redis as numbers, written
//! without a `String` per argument.

use redis::{RedisWrite, ToRedisArgs};
use std::sync::Arc;

/// One `ARGV` entry: how a field is written.
pub(crate) trait Arg {
    /// Writes the entry (nothing for an absent trailing one).
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W);
    /// The number of entries written: 1, or 0 for an absent trailing one.
    fn count(&self) -> usize {
        1
    }
}

impl Arg for u64 {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        self.write_redis_args(out);
    }
}

/// A flag, `1` or `0`.
impl Arg for bool {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        self.write_redis_args(out);
    }
}

/// How a fixed window's windows fall (`lua/fixed.lua`'s `windows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowsArg {
    /// `0`: in phase with `phase` (aligned, key offset, calendar week).
    Phased,
    /// `1`: opened by the first admitted request.
    FirstRequest,
    /// `M`: the months of the UTC calendar.
    Month,
}

impl Arg for WindowsArg {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        out.write_arg(match self {
            WindowsArg::Phased => b"0",
            WindowsArg::FirstRequest => b"1",
            WindowsArg::Month => b"M",
        });
    }
}

/// A number, or the empty string when absent (the scripts test `== ''`).
impl Arg for Option<u64> {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Some(n) => n.write_redis_args(out),
            None => out.write_arg(b""),
        }
    }
}

/// The live stamp: written only when present, always the last entry.
impl Arg for Option<Arc<str>> {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        if let Some(s) = self {
            out.write_arg(s.as_bytes());
        }
    }
    fn count(&self) -> usize {
        usize::from(self.is_some())
    }
}

/// What a call does: `c` check, `r` refund, `u` settle up (charge
/// whatever is left), `d` settle down (refund, then answer a peek), `b`
/// ban, `w` write a ban back, or `hP` write back a denial by limit `P`
/// (`lua/ban.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpArg {
    Check,
    Refund,
    SettleUp,
    SettleDown,
    Ban,
    WriteBan,
    WriteDenial(u8),
}

impl Arg for OpArg {
    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        out.write_arg(match self {
            OpArg::Check => b"c",
            OpArg::Refund => b"r",
            OpArg::SettleUp => b"u",
            OpArg::SettleDown => b"d",
            OpArg::Ban => b"b",
            OpArg::WriteBan => b"w",
            OpArg::WriteDenial(part) => return out.write_arg(format!("h{part}").as_bytes()),
        });
    }
}

/// A struct whose fields are `ARGV` entries in declaration order, with its
/// field names as `FIELDS`, its entry count and its writer.
macro_rules! script_args {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) struct $name {
            $($(#[$fmeta])* pub(crate) $field: $ty,)+
        }

        impl $name {
            /// The field names, in `ARGV` order.
            #[cfg_attr(not(test), allow(dead_code))]
            pub(crate) const FIELDS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// The number of entries [`write`](Self::write) writes.
            #[allow(dead_code)] // not every struct's is used
            pub(crate) fn len(&self) -> usize {
                0 $(+ Arg::count(&self.$field))+
            }

            /// Writes the entries in order.
            pub(crate) fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
                $(Arg::write(&self.$field, out);)+
            }
        }
    };
}

script_args! {
    /// `ARGV[1..=7]`, shared by every script (`lua/common.lua`).
    CommonArgs {
        /// Check or refund.
        op: OpArg,
        /// The request's cost.
        cost: u64,
        /// Now, whole seconds; absent: the server's time.
        now_s: Option<u64>,
        /// Now, nanoseconds in the second.
        now_ns: Option<u64>,
        /// A refund's admission time, whole seconds, or (server time) its
        /// age in ns.
        refund_s: Option<u64>,
        /// A refund's admission time, nanoseconds in the second.
        refund_ns: Option<u64>,
        /// TTL slack in milliseconds.
        ttl_slack_ms: u64,
    }
}

script_args! {
    /// GCRA and token bucket, `ARGV[8..]` (`lua/gcra.lua`): `T = P / L` in
    /// units of `1/scale` ns as `(step_w, step_f)`, `B*T` as
    /// `(burst_w, burst_f)`.
    GcraArgs {
        scale: u64,
        step_w: u64,
        step_f: u64,
        burst_w: u64,
        burst_f: u64,
        burst: u64,
        stamp: Option<Arc<str>>,
    }
}

script_args! {
    /// Leaky bucket, `ARGV[8..]` (`lua/leaky.lua`): as GCRA with `Q*T`.
    LeakyArgs {
        scale: u64,
        step_w: u64,
        step_f: u64,
        queue_w: u64,
        queue_f: u64,
        queue: u64,
        stamp: Option<Arc<str>>,
    }
}

script_args! {
    /// Fixed window, `ARGV[8..]` (`lua/fixed.lua`); `phase` is filled in
    /// per key with a key-offset anchor.
    FixedArgs {
        period: u64,
        limit: u64,
        period_g: u64,
        phase: u64,
        windows: WindowsArg,
        stamp: Option<Arc<str>>,
    }
}

script_args! {
    /// Sliding window, `ARGV[8..]` (`lua/sliding.lua`).
    SlidingArgs {
        period: u64,
        limit: u64,
        period_g: u64,
        stamp: Option<Arc<str>>,
    }
}

script_args! {
    /// Sliding log, `ARGV[8..]` (`lua/log.lua`).
    LogArgs {
        period: u64,
        limit: u64,
        period_g: u64,
        exact: bool,
        stamp: Option<Arc<str>>,
    }
}

/// An algorithm's parameters, `ARGV[8..]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Params {
    Gcra(GcraArgs),
    Leaky(LeakyArgs),
    Fixed(FixedArgs),
    Sliding(SlidingArgs),
    Log(LogArgs),
}

impl Params {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        match self {
            Params::Gcra(a) => a.len(),
            Params::Leaky(a) => a.len(),
            Params::Fixed(a) => a.len(),
            Params::Sliding(a) => a.len(),
            Params::Log(a) => a.len(),
        }
    }

    /// Writes the entries, with a fixed window's `phase` replaced by
    /// `phase` when given.
    pub(crate) fn write<W: ?Sized + RedisWrite>(&self, phase: Option<u64>, out: &mut W) {
        match self {
            Params::Gcra(a) => a.write(out),
            Params::Leaky(a) => a.write(out),
            Params::Fixed(a) => match phase {
                // The stamp is shared, not copied.
                Some(phase) => FixedArgs { phase, ..a.clone() }.write(out),
                None => a.write(out),
            },
            Params::Sliding(a) => a.write(out),
            Params::Log(a) => a.write(out),
        }
    }

    /// The live stamp, `None` until the plan goes live (`Plan::live`).
    pub(crate) fn stamp_mut(&mut self) -> &mut Option<Arc<str>> {
        match self {
            Params::Gcra(a) => &mut a.stamp,
            Params::Leaky(a) => &mut a.stamp,
            Params::Fixed(a) => &mut a.stamp,
            Params::Sliding(a) => &mut a.stamp,
            Params::Log(a) => &mut a.stamp,
        }
    }

    /// The entries as text (for fingerprints, stamps and debugging).
    pub(crate) fn texts(&self) -> Vec<String> {
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(self.len());
        self.write(None, &mut out);
        out.into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }
}

/// The ban settings, the last four entries of every call (`lua/ban.lua`,
/// which takes them off before the store's script runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BanArgs {
    /// The ban on a denial, ms (0: none).
    pub(crate) ms: u64,
    /// The factor of each repeat offence.
    pub(crate) escalate: f64,
    /// The longest ban, ms.
    pub(crate) max_ms: u64,
    /// How long after a ban its offences are remembered, ms.
    pub(crate) forgive_ms: u64,
}

impl BanArgs {
    /// The arguments of `ban` (none: no ban on denials).
    pub(crate) fn of(ban: Option<&ratelimit_core::BanPolicy>) -> Self {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        match ban {
            None => Self {
                ms: 0,
                escalate: 1.0,
                max_ms: 0,
                forgive_ms: 0,
            },
            Some(b) => Self {
                ms: ms(b.duration()),
                escalate: b.factor(),
                max_ms: ms(b.max()),
                forgive_ms: u64::try_from(b.forgive().as_millis()).unwrap_or(u64::MAX),
            },
        }
    }

    fn write<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        self.ms.write_redis_args(out);
        out.write_arg(format!("{}", self.escalate).as_bytes());
        self.max_ms.write_redis_args(out);
        self.forgive_ms.write_redis_args(out);
    }
}

/// Every entry of a call: the common ones, then either the one limit's
/// parameters, or per limit the number of its parameters and its
/// parameters (`lua/multi.lua`).
pub(crate) struct CallArgs<I> {
    pub(crate) common: CommonArgs,
    /// Each limit's parameters and, for a key-offset fixed window, the
    /// key's phase; an iterator cloned per write.
    pub(crate) limits: I,
    /// Whether the script checks several limits (`lua/multi.lua`).
    pub(crate) multi: bool,
    /// The ban settings, last.
    pub(crate) ban: BanArgs,
}

impl<'a, I> ToRedisArgs for CallArgs<I>
where
    I: Iterator<Item = (&'a Params, Option<u64>)> + Clone,
{
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        self.common.write(out);
        for (params, phase) in self.limits.clone() {
            if self.multi {
                (params.len() as u64).write_redis_args(out);
            }
            params.write(phase, out);
        }
        self.ban.write(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMON: &str = include_str!("lua/common.lua");
    const SCALED: &str = include_str!("lua/scaled.lua");
    const WINDOW: &str = include_str!("lua/window.lua");

    /// The names of a script's header lines `-- ARGV[i]  name: ...`, in
    /// order, checking that `i` runs on from `first`.
    fn header(src: &str, first: usize) -> Vec<&str> {
        let mut names = Vec::new();
        for line in src.lines() {
            let Some(rest) = line.strip_prefix("-- ARGV[") else {
                continue;
            };
            let Some((index, rest)) = rest.split_once(']') else {
                continue;
            };
            let Ok(index) = index.parse::<usize>() else {
                continue; // `ARGV[8..]` and the like
            };
            assert_eq!(index, first + names.len(), "header line {line:?}");
            let name = rest.trim_start().split(':').next().unwrap().trim();
            names.push(name);
        }
        names
    }

    /// The largest `ARGV[i]` a script reads.
    fn max_read(src: &str) -> usize {
        src.match_indices("ARGV[")
            .filter_map(|(i, _)| {
                let rest = &src[i + 5..];
                rest[..rest.find(']')?].parse::<usize>().ok()
            })
            .max()
            .unwrap_or(0)
    }

    fn check(name: &str, algorithm_src: &str, family: &str, fields: &[&str]) {
        assert_eq!(
            header(algorithm_src, 8),
            fields,
            "{name}: the script's header and the struct's fields differ"
        );
        let full = format!("{COMMON}\n{family}\n{algorithm_src}");
        assert_eq!(
            max_read(&full),
            7 + fields.len(),
            "{name}: the script reads up to another ARGV"
        );
    }

    #[test]
    fn headers_match_the_structs() {
        assert_eq!(header(COMMON, 1), CommonArgs::FIELDS);
        check(
            "gcra",
            include_str!("lua/gcra.lua"),
            SCALED,
            GcraArgs::FIELDS,
        );
        check(
            "leaky",
            include_str!("lua/leaky.lua"),
            SCALED,
            LeakyArgs::FIELDS,
        );
        check(
            "fixed",
            include_str!("lua/fixed.lua"),
            WINDOW,
            FixedArgs::FIELDS,
        );
        check(
            "sliding",
            include_str!("lua/sliding.lua"),
            WINDOW,
            SlidingArgs::FIELDS,
        );
        check("log", include_str!("lua/log.lua"), WINDOW, LogArgs::FIELDS);
    }

    #[test]
    fn a_swap_in_a_header_fails() {
        let swapped = "-- ARGV[8]  limit: L\n-- ARGV[9]  period: P\n";
        assert_ne!(header(swapped, 8), &SlidingArgs::FIELDS[..2]);
        let ok = "-- ARGV[8]  period: P\n-- ARGV[9]  limit: L\n";
        assert_eq!(header(ok, 8), &SlidingArgs::FIELDS[..2]);
    }

    fn texts<T: ToRedisArgs>(t: &T) -> Vec<String> {
        t.to_redis_args()
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    /// Entries are written in declaration order, numbers as their digits,
    /// an absent time as '', an absent stamp not at all.
    #[test]
    fn entries_in_field_order() {
        let common = CommonArgs {
            op: OpArg::Refund,
            cost: 2,
            now_s: Some(3),
            now_ns: Some(4),
            refund_s: None,
            refund_ns: Some(6),
            ttl_slack_ms: 7,
        };
        let fixed = Params::Fixed(FixedArgs {
            period: 8,
            limit: 9,
            period_g: 10,
            phase: 0,
            windows: WindowsArg::FirstRequest,
            stamp: None,
        });
        let one = CallArgs {
            common: common.clone(),
            limits: std::iter::once((&fixed, Some(11))),
            multi: false,
            ban: BanArgs::of(None),
        };
        assert_eq!(
            texts(&one),
            ["r", "2", "3", "4", "", "6", "7", "8", "9", "10", "11", "1", "0", "1", "0", "0"]
        );
        assert_eq!(CommonArgs::FIELDS.len(), common.len());
        let mut log = Params::Log(LogArgs {
            period: 8,
            limit: 9,
            period_g: 10,
            exact: false,
            stamp: None,
        });
        assert_eq!(log.len(), LogArgs::FIELDS.len() - 1);
        *log.stamp_mut() = Some("o:8:9".into());
        assert_eq!(log.len(), LogArgs::FIELDS.len());
        let multi = CallArgs {
            common,
            limits: [(&fixed, None), (&log, None)].into_iter(),
            multi: true,
            ban: BanArgs::of(None),
        };
        let t = texts(&multi);
        assert_eq!(
            &t[7..],
            [
                "5", "8", "9", "10", "0", "1", "5", "8", "9", "10", "0", "o:8:9", "0", "1", "0",
                "0"
            ]
        );
    }

    /// The arguments and keys of a store of three limits, as they were
    /// when built as text: the structs changed neither.
    #[test]
    fn arguments_and_keys_are_unchanged() {
        use ratelimit_core::algorithm::Anchor;
        use ratelimit_core::{FixedWindow, Gcra, SlidingLog};
        use std::time::Duration;
        let s = Duration::from_secs(1);
        let store = crate::RedisStore::builder(
            "redis://127.0.0.1:1",
            Gcra::with_burst(7, Duration::from_millis(1300), 5).unwrap(),
        )
        .and_limit(
            FixedWindow::new(5, s)
                .unwrap()
                .with_anchor(Anchor::KeyOffset)
                .unwrap(),
        )
        .and_limit(SlidingLog::new(5, s).unwrap())
        .build()
        .unwrap();
        let keys = [
            "ratelimit:{user-1}:gcra:be1eef3c",
            "ratelimit:{user-1}:fw:6f9dc4bf",
            "ratelimit:{user-1}:sl:d365ebcf",
        ];
        assert_eq!(store.redis_keys("user-1"), keys);
        let args = store.script_args("user-1", 3, Some(5));
        assert_eq!(&args[..3], keys);
        assert_eq!(args[3], "ratelimit:{user-1}:ban");
        let expected = [
            &["c", "3", "0", "5", "", "", "1000"][..], // common
            &["6", "7", "185714285", "5", "928571428", "4", "5"], // gcra
            &["5", "1000000000", "5", "1", "655370708", "0"], // fixed, key offset
            &["4", "1000000000", "5", "1", "0"],       // log
            &["0", "1", "0", "0"],                     // no ban on denials
        ]
        .concat();
        assert_eq!(args[4..], expected);
    }

    /// A fixed window's phase, replaced per key, lands where `phase` is.
    #[test]
    fn fixed_phase_is_replaced() {
        let fixed = FixedArgs {
            period: 1,
            limit: 2,
            period_g: 3,
            phase: 4,
            windows: WindowsArg::Phased,
            stamp: Some("f:1:2:k".into()),
        };
        let mut plain: Vec<Vec<u8>> = Vec::new();
        fixed.write(&mut plain);
        let mut replaced: Vec<Vec<u8>> = Vec::new();
        Params::Fixed(fixed.clone()).write(Some(4), &mut replaced);
        assert_eq!(plain, replaced);
        let at = FixedArgs::FIELDS
            .iter()
            .position(|f| *f == "phase")
            .unwrap();
        assert_eq!(plain[at], b"4");
    }
}
