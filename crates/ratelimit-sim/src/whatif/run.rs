//! The replay loop: every line of the log through every policy's engine,
//! counted.

use super::diff::Diff;
use super::engine::{Engine, Outcome};
use super::format::{Format, JsonFields};
use super::input::{next_line, text};
use super::line::LogLine;
use super::pipeline::{Batch, Parser};
use super::tally::Tally;
use crate::SimError;
use std::io::{BufRead, Write};
use tower_ratelimit::strategy::Mode;

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

/// A replay under way.
struct Replay<'a> {
    engines: &'a mut [Engine],
    decisions: Option<&'a mut dyn Write>,
    tallies: Vec<Tally>,
    diff: Option<Diff>,
    outcomes: Vec<Option<Outcome>>,
    number: u64,
}

impl Replay<'_> {
    /// Replays one line of the log, parsed.
    async fn line(&mut self, parsed: Result<LogLine, String>) -> Result<(), SimError> {
        self.number += 1;
        self.outcomes.clear();
        if let Ok(l) = &parsed {
            for engine in self.engines.iter_mut() {
                self.outcomes.push(engine.decide(l).await);
            }
        }
        let reason = match (&parsed, self.outcomes.first()) {
            (Err(e), _) => Some(e.clone()),
            (Ok(_), Some(None)) => Some("no request http can carry".to_owned()),
            _ => None,
        };
        if let Some(out) = self.decisions.as_deref_mut() {
            let what = match (&reason, self.outcomes.first()) {
                (None, Some(Some(o))) => decision(&self.engines[0], o),
                _ => "skipped".to_owned(),
            };
            let status = parsed.as_ref().map_or(0, |l| l.status);
            writeln!(out, "{} {status} {what}", self.number)
                .map_err(|e| SimError(format!("cannot write the decisions: {e}")))?;
        }
        let l = match (parsed, reason) {
            (Ok(l), None) => l,
            (_, why) => {
                for t in &mut self.tallies {
                    t.lines += 1;
                    t.skip(self.number, why.clone().unwrap_or_default());
                }
                return Ok(());
            }
        };
        for (t, o) in self.tallies.iter_mut().zip(&self.outcomes) {
            t.lines += 1;
            if let Some(o) = o {
                t.add(&l, o);
            }
        }
        if let (Some(d), [Some(new), Some(old)]) = (&mut self.diff, self.outcomes.as_slice()) {
            d.add(&l, new, old);
        }
        if self.number % 1024 == 0 {
            held(self.engines, &mut self.tallies);
        }
        Ok(())
    }

    /// Reads the rest of `reader` (when there is `more`) in batches for
    /// `parser`, and replays every line it parses, the sniffed ones first.
    async fn lines(
        &mut self,
        reader: &mut dyn BufRead,
        buf: &mut Vec<u8>,
        parser: &mut Parser,
        mut more: bool,
    ) -> Result<(), SimError> {
        let mut spare = Vec::new();
        loop {
            let next = if more {
                Batch::read(reader, buf, spare.pop().unwrap_or_default())?
            } else {
                None
            };
            more = next.is_some();
            if let Some(b) = next {
                parser.send(b)?;
            }
            let Some((parsed, batch)) = parser.recv()? else {
                break;
            };
            spare.push(batch);
            for line in parsed {
                self.line(line).await?;
            }
        }
        Ok(())
    }
}

/// Replays `reader` through `engines` (the new policy first).
pub async fn replay<'a>(
    reader: &mut dyn BufRead,
    format: Option<Format>,
    fields: &'a JsonFields,
    engines: &'a mut [Engine],
    decisions: Option<&'a mut dyn Write>,
) -> Result<Replayed, SimError> {
    let mut buf = Vec::new();
    let (first, more) = sniff(reader, &mut buf)?;
    let format = match format {
        Some(f) => f,
        None => Format::detect(first.iter().map(String::as_str)).map_err(SimError)?,
    };
    let mut run = Replay {
        tallies: engines.iter().map(tally_for).collect(),
        diff: (engines.len() > 1).then(Diff::default),
        outcomes: Vec::with_capacity(engines.len()),
        engines,
        decisions,
        number: 0,
    };
    let mut parser = Parser::start(format, fields.clone());
    let mut batch = Batch::default();
    for line in &first {
        batch.push(line.as_bytes());
    }
    parser.send(batch)?;
    run.lines(reader, &mut buf, &mut parser, more).await?;
    held(run.engines, &mut run.tallies);
    Ok(Replayed {
        format,
        tallies: run.tallies,
        diff: run.diff,
    })
}

/// The first [`SNIFF`] lines that are not blank, read to detect the
/// format, and whether more may follow.
fn sniff(reader: &mut dyn BufRead, buf: &mut Vec<u8>) -> Result<(Vec<String>, bool), SimError> {
    let mut first: Vec<String> = Vec::new();
    let mut more = true;
    while first.len() < SNIFF {
        more = next_line(reader, buf)?;
        if !more {
            break;
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            first.push(text(buf).into_owned());
        }
    }
    Ok((first, more))
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
