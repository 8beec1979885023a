//! The replay loop: every line of the log through every policy's engine,
//! counted.

use super::diff::Diff;
use super::engine::{Engine, Outcome};
use super::format::{Format, JsonFields};
use super::input::{next_line, text};
use super::tally::Tally;
use crate::SimError;
use std::io::{BufRead, Write};
use tower_ratelimit::policy::Mode;

/// Lines read to detect the format.
const SNIFF: usize = 20;

/// What a replay found.
pub struct Replayed {
    /// The log's format.
    pub format: Format,
    /// The tally of each policy (the new one first).
    pub tallies: Vec<Tally>,
    /// With two policies: their difference.
    pub diff: Option<Diff>,
}

/// The decision of one line, for `--decisions`.
fn decision(engine: &Engine, o: &Outcome) -> String {
    match (&o.limited, o.key_error) {
        (Some(l), _) => format!(
            "{} {} {}",
            if l.dry_run { "dry-run" } else { "limited" },
            engine.entries()[l.limit].name,
            l.key
        ),
        (None, Some((i, status))) => {
            format!("key-error {} {status}", engine.entries()[i].name)
        }
        (None, None) => "admitted".to_owned(),
    }
}

/// Replays `reader` through `engines` (the new policy first).
pub async fn replay(
    reader: &mut dyn BufRead,
    format: Option<Format>,
    fields: &JsonFields,
    engines: &mut [Engine],
    mut decisions: Option<&mut dyn Write>,
) -> Result<Replayed, SimError> {
    let mut buf = Vec::new();
    let mut first: Vec<String> = Vec::new();
    let mut more = true;
    while first.len() < SNIFF {
        more = next_line(reader, &mut buf)?;
        if !more {
            break;
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            first.push(text(&buf).into_owned());
        }
    }
    let format = match format {
        Some(f) => f,
        None => Format::detect(first.iter().map(String::as_str)).map_err(SimError)?,
    };
    let mut tallies: Vec<Tally> = engines.iter().map(tally_for).collect();
    let mut diff = (engines.len() > 1).then(Diff::default);
    let mut number = 0u64;
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(engines.len());
    let mut pending = first.into_iter();
    loop {
        let line = match pending.next() {
            Some(l) => l,
            None if more => {
                more = next_line(reader, &mut buf)?;
                if !more {
                    break;
                }
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                text(&buf).into_owned()
            }
            None => break,
        };
        number += 1;
        let parsed = format.parse(&line, fields);
        outcomes.clear();
        if let Ok(l) = &parsed {
            for engine in engines.iter_mut() {
                outcomes.push(engine.decide(l).await);
            }
        }
        let status = parsed.as_ref().map_or(0, |l| l.status);
        let reason = match (&parsed, outcomes.first()) {
            (Err(e), _) => Some(e.clone()),
            (Ok(_), Some(None)) => Some("no request http can carry".to_owned()),
            _ => None,
        };
        if let Some(out) = decisions.as_deref_mut() {
            let what = match (&reason, outcomes.first()) {
                (None, Some(Some(o))) => decision(&engines[0], o),
                _ => "skipped".to_owned(),
            };
            writeln!(out, "{number} {status} {what}")
                .map_err(|e| SimError(format!("cannot write the decisions: {e}")))?;
        }
        let (Ok(l), None) = (&parsed, reason) else {
            for t in &mut tallies {
                t.lines += 1;
                t.skip(number, parsed.as_ref().err().cloned().unwrap_or_default());
            }
            continue;
        };
        for (t, o) in tallies.iter_mut().zip(&outcomes) {
            t.lines += 1;
            if let Some(o) = o {
                t.add(l, o);
            }
        }
        if let (Some(d), [Some(new), Some(old)]) = (&mut diff, outcomes.as_slice()) {
            d.add(l, new, old);
        }
        if number % 1024 == 0 {
            held(engines, &mut tallies);
        }
    }
    held(engines, &mut tallies);
    Ok(Replayed {
        format,
        tallies,
        diff,
    })
}

fn held(engines: &[Engine], tallies: &mut [Tally]) {
    for (e, t) in engines.iter().zip(tallies) {
        t.keys_held(&e.key_counts());
    }
}

/// An empty tally of `engine`'s limits.
fn tally_for(engine: &Engine) -> Tally {
    Tally::new(
        engine.entries().iter().map(|e| {
            let mode = match e.mode {
                Mode::DryRun => "dry-run",
                Mode::Shape => "shape",
                Mode::Enforce => "enforce",
            };
            (e.name.clone(), mode.to_owned())
        }),
        engine.max_keys(),
    )
}
