//! Replaying a trace through a store on a manual clock.

use crate::{parse_line, Event, SimError};
use ratelimit_core::{AnyAlgorithm, Clock, Decision, ManualClock, MemoryStore, Store};
use std::io::{BufRead, Write};

/// Decides events in order through a [`MemoryStore`] on a [`ManualClock`]:
/// the same code path a service uses.
///
/// ```
/// use ratelimit_sim::{parse_line, Replayer};
///
/// let mut replayer = Replayer::new("gcra 1/1s".parse().unwrap());
/// let event = parse_line("0 alice").unwrap().unwrap();
/// assert!(replayer.decide(&event).unwrap().allowed);
/// assert!(!replayer.decide(&event).unwrap().allowed);
/// ```
#[derive(Debug)]
pub struct Replayer {
    store: MemoryStore<AnyAlgorithm, String>,
    clock: ManualClock,
    last_ms: u64,
}

impl Replayer {
    /// A replayer for `algorithm`, at time 0.
    pub fn new(algorithm: AnyAlgorithm) -> Self {
        Self {
            store: MemoryStore::new(algorithm),
            clock: ManualClock::new(),
            last_ms: 0,
        }
    }

    /// Decides one event; times must not decrease.
    pub fn decide(&mut self, event: &Event) -> Result<Decision, SimError> {
        if event.t_ms < self.last_ms {
            return Err(SimError(format!(
                "time {} is before the previous time {}",
                event.t_ms, self.last_ms
            )));
        }
        let nanos = event
            .t_ms
            .checked_mul(1_000_000)
            .ok_or_else(|| SimError(format!("time {} ms is too large", event.t_ms)))?;
        self.last_ms = event.t_ms;
        self.clock.set_nanos(nanos);
        self.store
            .check(event.key.as_str(), event.cost, self.clock.now())
            .value()
            .map_err(|e| SimError(e.to_string()))
    }
}

/// Formats `T_MS KEY allow|deny REMAINING WAIT_MS`, the wait rounded up to
/// a whole millisecond, `inf` for never.
pub fn format_decision(event: &Event, d: &Decision) -> String {
    let verdict = if d.allowed { "allow" } else { "deny" };
    let wait = match d.wait {
        Some(w) => w.as_nanos().div_ceil(1_000_000).to_string(),
        None => "inf".to_owned(),
    };
    format!(
        "{} {} {verdict} {} {wait}",
        event.t_ms, event.key, d.remaining
    )
}

/// Replays `input` through `algorithm`, writing one line per request to
/// `output`. Stops at the first bad line, with an error naming its number.
pub fn replay(
    algorithm: AnyAlgorithm,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), SimError> {
    let mut replayer = Replayer::new(algorithm);
    let io_error = |e: std::io::Error| SimError(format!("i/o error: {e}"));
    for (i, line) in input.lines().enumerate() {
        let at_line = |e: SimError| SimError(format!("line {}: {}", i + 1, e.0));
        let line = line.map_err(|e| at_line(io_error(e)))?;
        let Some(event) = parse_line(&line).map_err(at_line)? else {
            continue;
        };
        let decision = replayer.decide(&event).map_err(at_line)?;
        writeln!(output, "{}", format_decision(&event, &decision)).map_err(io_error)?;
    }
    output.flush().map_err(io_error)
}
