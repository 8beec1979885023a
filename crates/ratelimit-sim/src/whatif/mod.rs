//! `ratelimit-sim what-if`: replays a real access log through a policy
//! file before it is deployed, and reports who would have been limited.
//!
//! The log (nginx `combined` and its variants, JSON lines, AWS ALB,
//! Envoy's default; gzipped or not; the format detected when `--format`
//! is absent) is read line by line; each line becomes the request the app
//! received (method, target, the logged `X-Forwarded-For` and headers,
//! the logged remote address as the peer) and goes through the layers
//! `tower_ratelimit`'s [`PolicyTable`](tower_ratelimit::policy::PolicyTable)
//! builds from the file, in an axum router answering with the logged
//! status, on a manual clock set from the line's time (see [`engine`]).
//!
//! The report, per limit and per route: requests seen, admitted and
//! limited, distinct keys limited, the keys limited most (hashed with
//! `--redact`; API keys and bearer tokens always), the first and busiest
//! minutes of limiting, and how many limited requests the log shows
//! served (2xx, 3xx). As a table, as JSON (`--json`), and as an SVG chart
//! (`--svg`). `--against current.toml` compares two policies on the same
//! log.
//!
//! ```text
//! ratelimit-sim what-if --policy ratelimit.toml --log access.log.gz --trusted-proxies 10.0.0.0/8
//! ```

mod args;
mod chart;
mod diff;
pub mod engine;
mod format;
mod input;
mod line;
mod pipeline;
mod report;
mod run;
mod setup;
mod tally;
mod time;

pub use args::WhatIfArgs;
pub use format::{Format, JsonFields};
pub use line::LogLine;

use crate::SimError;
use engine::Engine;
use std::io::{BufRead, Write};

/// Writes `text` to the file `path`.
fn write_file(path: &str, text: &str, what: &str) -> Result<(), SimError> {
    std::fs::write(path, text).map_err(|e| SimError(format!("cannot write the {what} {path}: {e}")))
}

/// Runs `what-if`: reads the log (`--log -`: `stdin`) and writes the
/// report to `output`.
pub fn run_what_if(
    args: &WhatIfArgs,
    stdin: impl BufRead,
    mut output: impl Write,
) -> Result<(), SimError> {
    let fields = JsonFields::new(&args.fields).map_err(SimError)?;
    let new = setup::load(&args.policy)?;
    let old = args.against.as_deref().map(setup::load).transpose()?;
    let tables: Vec<_> = std::iter::once(&new).chain(old.as_ref()).collect();
    let options = setup::options(args, &tables)?;
    let mut reader = input::open(&args.log, stdin)?;
    let mut decisions = match &args.decisions {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| SimError(format!("cannot write the decisions {path}: {e}")))?,
        )),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| SimError(format!("cannot start the replay: {e}")))?;
    let replayed = rt.block_on(async {
        let mut engines = tables
            .iter()
            .map(|t| Engine::new(t, options.clone()).map_err(SimError))
            .collect::<Result<Vec<_>, _>>()?;
        let sink = decisions.as_mut().map(|d| d as &mut dyn Write);
        run::replay(&mut reader, args.format, &fields, &mut engines, sink).await
    })?;
    if let Some(mut d) = decisions {
        d.flush()
            .map_err(|e| SimError(format!("cannot write the decisions: {e}")))?;
    }
    let t = &replayed.tallies[0];
    let text = if args.json {
        let mut v = report::tally_json(&replayed, t, args.top);
        if let (Some(d), Some(old)) = (&replayed.diff, replayed.tallies.get(1)) {
            let current = report::tally_json(&replayed, old, args.top);
            v["against"] = report::against_json(d, t, old, current);
        }
        format!("{v:#}\n")
    } else {
        let mut s = report::table(&replayed, t, args.top);
        if let (Some(d), Some(old)) = (&replayed.diff, replayed.tallies.get(1)) {
            s.push_str(&report::against_table(d, t, old, args.top));
        }
        s
    };
    if let Some(path) = &args.svg {
        let title = format!("what-if: {} on {}", args.policy, args.log);
        write_file(path, &chart::render(t, &title, 1000)?, "chart")?;
    }
    output
        .write_all(text.as_bytes())
        .and_then(|()| output.flush())
        .map_err(|e| SimError(format!("cannot write the report: {e}")))
}
