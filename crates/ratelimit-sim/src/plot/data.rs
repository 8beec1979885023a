//! The chart's numbers: per panel, the bins of admitted, held and denied
//! requests and the remaining capacity over time.

use crate::{AlgorithmSpec, Event, Replayer, SimError};
use ratelimit_core::Decision;
use std::time::Duration;

/// What one panel draws.
///
/// ```
/// use ratelimit_sim::{chart_data, parse_generator, AlgorithmSpec, Chart};
///
/// let specs = [AlgorithmSpec::parse("gcra 10/1s").unwrap()];
/// let words = ["steady", "--rate", "20", "--period", "1s", "--duration", "2s"];
/// let events = parse_generator(&words.map(String::from)).unwrap().events();
/// let chart: Chart = chart_data(&specs, &events, None, None).unwrap();
/// let panel = &chart.panels[0];
/// assert_eq!(panel.admitted + panel.denied, 40);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The algorithm as written.
    pub label: String,
    /// Per bin: requests admitted at once, admitted but held, denied.
    pub bins: Vec<[u64; 3]>,
    /// `(time in ms, remaining)`, in time order.
    pub remaining: Vec<(u64, u64)>,
    /// When each held request goes on, in ms (fractional).
    pub departures: Vec<f64>,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied.
    pub denied: u64,
}

/// Everything the chart draws.
///
/// ```
/// use ratelimit_sim::{chart_data, parse_generator, AlgorithmSpec, Chart};
///
/// let specs = [AlgorithmSpec::parse("gcra 10/1s").unwrap()];
/// let words = ["steady", "--rate", "20", "--period", "1s", "--duration", "2s"];
/// let events = parse_generator(&words.map(String::from)).unwrap().events();
/// let chart: Chart = chart_data(&specs, &events, None, None).unwrap();
/// let panel = &chart.panels[0];
/// assert_eq!(panel.admitted + panel.denied, 40);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The key drawn.
    pub key: String,
    /// The width of a bin in ms.
    pub bin_ms: u64,
    /// The end of the time axis in ms (the start is 0).
    pub end_ms: u64,
    /// One panel per algorithm.
    pub panels: Vec<Panel>,
}

/// A round bin width near `span / 100`: 1, 2 or 5 times a power of ten ms.
pub(super) fn auto_bin(span_ms: u64) -> u64 {
    let target = (span_ms / 100).max(1);
    let mut unit = 1u64;
    loop {
        for m in [1, 2, 5] {
            match unit.checked_mul(m) {
                Some(bin) if bin >= target => return bin,
                Some(_) => {}
                None => return u64::MAX,
            }
        }
        unit = unit.saturating_mul(10);
    }
}

/// The most bars a panel may have.
const MAX_BINS: u64 = 20_000;

/// Runs the events of `key` (default: the first key) through each
/// algorithm and gathers what the chart draws.
pub fn chart_data(
    specs: &[AlgorithmSpec],
    events: &[Event],
    key: Option<&str>,
    bin: Option<Duration>,
) -> Result<Chart, SimError> {
    let key = match key {
        Some(k) => k.to_owned(),
        None => events
            .first()
            .map(|e| e.key.clone())
            .ok_or_else(|| SimError("the trace is empty: nothing to plot".to_owned()))?,
    };
    let events: Vec<&Event> = events.iter().filter(|e| e.key == key).collect();
    let last = events
        .last()
        .ok_or_else(|| SimError(format!("no request of key {key:?} to plot")))?
        .t_ms;
    if last > u64::MAX / 1_000_000 {
        return Err(SimError(format!("time {last} ms is too large")));
    }
    // The axis ends after the last request, or after the last held request
    // goes on, whichever is later.
    let mut span_ms = last + 1;
    for spec in specs {
        let mut replayer = Replayer::new(spec.algorithm);
        for event in &events {
            let d = replayer.decide(event)?;
            if d.allowed {
                let hold_ms = u64::try_from(d.hold().as_millis()).unwrap_or(u64::MAX);
                span_ms = span_ms.max(event.t_ms.saturating_add(hold_ms).saturating_add(1));
            }
        }
    }
    let bin_ms = match bin {
        Some(b) => u64::try_from(b.as_millis())
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| SimError("option --bin must be at least 1ms".to_owned()))?,
        None => auto_bin(span_ms),
    };
    if span_ms.div_ceil(bin_ms) > MAX_BINS {
        return Err(SimError(format!(
            "more than {MAX_BINS} bars of {bin_ms} ms: choose a wider --bin"
        )));
    }
    let end_ms = span_ms.div_ceil(bin_ms) * bin_ms;
    let panels = specs
        .iter()
        .map(|spec| run_panel(spec, &events, bin_ms, end_ms))
        .collect::<Result<_, _>>()?;
    Ok(Chart {
        key,
        bin_ms,
        end_ms,
        panels,
    })
}

fn run_panel(
    spec: &AlgorithmSpec,
    events: &[&Event],
    bin_ms: u64,
    end_ms: u64,
) -> Result<Panel, SimError> {
    let mut replayer = Replayer::new(spec.algorithm);
    let nbins = usize::try_from(end_ms / bin_ms).unwrap_or(usize::MAX);
    let mut panel = Panel {
        label: spec.label.clone(),
        bins: vec![[0; 3]; nbins],
        remaining: Vec::new(),
        departures: Vec::new(),
        admitted: 0,
        denied: 0,
    };
    let step = (bin_ms / 5).max(1);
    let key = events.first().map_or("", |e| e.key.as_str());
    let mut peeks = Peeks { key, step, next: 0 };
    for event in events {
        peeks.sample(&mut replayer, &mut panel, event.t_ms)?;
        let d = replayer.decide(event)?;
        panel.count(event.t_ms, &d, bin_ms);
    }
    // Keep sampling after the last request, to the end of the axis.
    peeks.sample(&mut replayer, &mut panel, end_ms)?;
    Ok(panel)
}

/// The cost-0 peeks between requests: one every `step` ms, from 0.
struct Peeks<'a> {
    key: &'a str,
    step: u64,
    next: u64,
}

impl Peeks<'_> {
    /// Peeks at every step up to `t_ms` (included) and records what
    /// remains.
    fn sample(
        &mut self,
        replayer: &mut Replayer,
        panel: &mut Panel,
        t_ms: u64,
    ) -> Result<(), SimError> {
        while self.next <= t_ms {
            let d = replayer.decide(&Event {
                t_ms: self.next,
                key: self.key.to_owned(),
                cost: 0,
            })?;
            panel.remaining.push((self.next, d.remaining));
            self.next += self.step;
        }
        Ok(())
    }
}

impl Panel {
    /// Counts the decision `d` of a request at `t_ms`: its bar, what
    /// remains, and when a held request goes on.
    fn count(&mut self, t_ms: u64, d: &Decision, bin_ms: u64) {
        self.remaining.push((t_ms, d.remaining));
        let slot = usize::try_from(t_ms / bin_ms).unwrap_or(usize::MAX);
        let category = match (d.allowed, d.hold().is_zero()) {
            (true, true) => 0,
            (true, false) => 1,
            (false, _) => 2,
        };
        if let Some(bin) = self.bins.get_mut(slot) {
            bin[category] += 1;
        }
        if d.allowed {
            self.admitted += 1;
            if !d.hold().is_zero() {
                self.departures
                    .push(t_ms as f64 + d.hold().as_nanos() as f64 / 1e6);
            }
        } else {
            self.denied += 1;
        }
    }
}
