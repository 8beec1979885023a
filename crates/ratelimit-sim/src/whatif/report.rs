//! The report: a table (per limit, per route, the keys limited most) or
//! JSON, and the comparison of two policies.

use super::diff::{self, Diff};
use super::run::Replayed;
use super::tally::{LimitTally, Tally};
use super::time::minute_text;
use serde_json::{json, Value};
use std::fmt::Write;

const MINUTE_NS: u64 = 60_000_000_000;

fn minute(m: Option<u64>) -> String {
    m.map_or_else(|| "-".to_owned(), minute_text)
}

/// The first lines: what was read, from when to when.
fn heading(r: &Replayed, t: &Tally, out: &mut String) {
    let _ = write!(
        out,
        "what-if: {} lines ({}), {} replayed, {} skipped",
        t.lines,
        r.format.name(),
        t.replayed,
        t.skipped
    );
    if let Some((a, b)) = t.span {
        let _ = write!(
            out,
            "; {} to {} UTC",
            minute_text(a / MINUTE_NS),
            minute_text(b / MINUTE_NS)
        );
    }
    out.push('\n');
    if let Some((n, why)) = &t.first_skip {
        let _ = writeln!(out, "first skipped line: {n}: {why}");
    }
    let _ = writeln!(
        out,
        "requests limited: {} of {}; refused for want of a key: {}",
        t.limited, t.replayed, t.key_errors
    );
}

fn limit_row(t: &Tally, i: usize, l: &LimitTally, out: &mut String) {
    let c = &l.counts;
    let busiest = l.busiest_minute().map_or_else(
        || "-".to_owned(),
        |(m, n)| format!("{} ({n})", minute_text(m)),
    );
    let cap = if t.cap_reached(i) { "reached" } else { "-" };
    let _ = writeln!(
        out,
        "{:<24} {:<8} {:>9} {:>9} {:>8} {:>6} {:>10} {:>6}  {:<16}  {:<24}  {cap}",
        l.name,
        l.mode,
        c.seen,
        c.admitted,
        c.limited,
        c.key_errors,
        c.limited_succeeded,
        l.keys.len(),
        minute(l.first_minute()),
        busiest
    );
}

/// The report of one policy as a table.
pub fn table(r: &Replayed, t: &Tally, top: usize) -> String {
    let mut out = String::new();
    heading(r, t, &mut out);
    let _ = writeln!(
        out,
        "\n{:<24} {:<8} {:>9} {:>9} {:>8} {:>6} {:>10} {:>6}  {:<16}  {:<24}  key cap",
        "limit",
        "mode",
        "seen",
        "admitted",
        "limited",
        "no key",
        "succeeded",
        "keys",
        "first limited",
        "busiest minute (limited)"
    );
    for (i, l) in t.limits.iter().enumerate() {
        limit_row(t, i, l, &mut out);
    }
    let _ = writeln!(
        out,
        "\n{:<24} {:<28} {:>9} {:>9} {:>8} {:>6} {:>10}",
        "limit", "route", "seen", "admitted", "limited", "no key", "succeeded"
    );
    for l in &t.limits {
        for (route, c) in &l.routes {
            let _ = writeln!(
                out,
                "{:<24} {:<28} {:>9} {:>9} {:>8} {:>6} {:>10}",
                l.name, route, c.seen, c.admitted, c.limited, c.key_errors, c.limited_succeeded
            );
        }
    }
    let limited: Vec<&LimitTally> = t.limits.iter().filter(|l| !l.keys.is_empty()).collect();
    if !limited.is_empty() {
        let _ = writeln!(out, "\nkeys limited most (requests limited):");
        for l in limited {
            let keys: Vec<String> = l
                .top_keys(top)
                .iter()
                .map(|(k, n)| format!("{k} ({n})"))
                .collect();
            let _ = writeln!(out, "  {}: {}", l.name, keys.join(", "));
        }
    }
    for (i, l) in t.limits.iter().enumerate() {
        if t.cap_reached(i) {
            let _ = writeln!(
                out,
                "\nlimit {:?}: its store reached its cap of {} keys and evicted keys \
                 (raise --max-keys to see what a larger store decides)",
                l.name, t.max_keys
            );
        }
    }
    out
}

/// The comparison as text.
pub fn against_table(d: &Diff, new: &Tally, old: &Tally, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nagainst the current policy: {} requests limited by the new policy and not the current \
         one ({} of them served in the log), {} limited by the current one and not the new, {} by both",
        d.new_only, d.new_only_succeeded, d.old_only, d.both
    );
    for k in diff::keys(new, old) {
        if k.new_only.is_empty() && k.old_only.is_empty() {
            continue;
        }
        let list = |keys: &[(String, u64)]| {
            keys.iter()
                .take(top)
                .map(|(k, n)| format!("{k} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "  {}: {} keys limited by the new policy only [{}]; {} by the current only [{}]",
            k.limit,
            k.new_only.len(),
            list(&k.new_only),
            k.old_only.len(),
            list(&k.old_only)
        );
    }
    out
}

fn limit_json(t: &Tally, i: usize, l: &LimitTally, top: usize) -> Value {
    let counts = |c: &super::tally::Counts| {
        json!({
            "seen": c.seen,
            "admitted": c.admitted,
            "limited": c.limited,
            "limited_succeeded": c.limited_succeeded,
            "key_errors": c.key_errors,
        })
    };
    let mut v = counts(&l.counts);
    v["name"] = json!(l.name);
    v["mode"] = json!(l.mode);
    v["distinct_keys_limited"] = json!(l.keys.len());
    v["top_keys"] = l
        .top_keys(top)
        .iter()
        .map(|(k, n)| json!({"key": k, "limited": n}))
        .collect();
    v["first_limited_minute"] = json!(l.first_minute().map(minute_text));
    v["busiest_minute"] = json!(l
        .busiest_minute()
        .map(|(m, n)| json!({"minute": minute_text(m), "limited": n})));
    v["key_cap"] =
        json!({"max_keys": t.max_keys, "most_held": l.most_keys, "reached": t.cap_reached(i)});
    v["routes"] = l
        .routes
        .iter()
        .map(|(route, c)| {
            let mut r = counts(c);
            r["route"] = json!(route);
            r
        })
        .collect();
    v
}

/// The report of one policy as JSON.
pub fn tally_json(r: &Replayed, t: &Tally, top: usize) -> Value {
    json!({
        "format": r.format.name(),
        "lines": t.lines,
        "replayed": t.replayed,
        "skipped": t.skipped,
        "first_skipped": t.first_skip.as_ref().map(|(n, why)| json!({"line": n, "why": why})),
        "start": t.span.map(|(a, _)| minute_text(a / MINUTE_NS)),
        "end": t.span.map(|(_, b)| minute_text(b / MINUTE_NS)),
        "limited": t.limited,
        "key_errors": t.key_errors,
        "limits": t.limits.iter().enumerate().map(|(i, l)| limit_json(t, i, l, top)).collect::<Vec<_>>(),
    })
}

/// The comparison as JSON.
pub fn against_json(d: &Diff, new: &Tally, old: &Tally, current: Value) -> Value {
    let pairs = |keys: &[(String, u64)]| -> Vec<Value> {
        keys.iter()
            .map(|(k, n)| json!({"key": k, "limited": n}))
            .collect()
    };
    json!({
        "requests_limited_by_new_only": d.new_only,
        "requests_limited_by_new_only_succeeded": d.new_only_succeeded,
        "requests_limited_by_current_only": d.old_only,
        "requests_limited_by_both": d.both,
        "limits": diff::keys(new, old).iter().map(|k| json!({
            "name": k.limit,
            "keys_limited_by_new_only": pairs(&k.new_only),
            "keys_limited_by_current_only": pairs(&k.old_only),
        })).collect::<Vec<_>>(),
        "current": current,
    })
}
