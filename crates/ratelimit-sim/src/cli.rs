//! What the subcommands (`plot`, `compare`, `generate`) share: their option
//! parser, the algorithms to compare and the trace to run them on.

use crate::{parse_algorithm, parse_generator, parse_line, Event, SimError};
use ratelimit_core::{parse_duration, AnyAlgorithm};
use std::io::BufRead;
use std::time::Duration;

/// `--name value` / `--name=value` pairs (and `-o value`, read as
/// `--svg`), in order. Names listed as repeatable may be given several
/// times; any other name at most once.
#[derive(Debug)]
pub(crate) struct Flags {
    pairs: Vec<(String, String)>,
}

impl Flags {
    pub(crate) fn parse(args: &[String], repeatable: &[&str]) -> Result<Self, SimError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let name = match arg.strip_prefix("--") {
                Some(name) => name,
                None if arg == "-o" => "svg",
                None => return Err(SimError(format!("unexpected argument {arg:?}"))),
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_owned(), v.to_owned()),
                None => {
                    let value = it
                        .next()
                        .ok_or_else(|| SimError(format!("option {arg} needs a value")))?;
                    (name.to_owned(), value.clone())
                }
            };
            if !repeatable.contains(&name.as_str()) && pairs.iter().any(|(n, _)| *n == name) {
                return Err(SimError(format!("option --{name} given twice")));
            }
            pairs.push((name, value));
        }
        Ok(Self { pairs })
    }

    /// Every value of `name`, in order, removing them.
    pub(crate) fn all(&mut self, name: &str) -> Vec<String> {
        let (taken, kept) = std::mem::take(&mut self.pairs)
            .into_iter()
            .partition(|(n, _)| n == name);
        self.pairs = kept;
        taken.into_iter().map(|(_, v)| v).collect()
    }

    /// The value of `name`, if given.
    pub(crate) fn single(&mut self, name: &str) -> Result<Option<String>, SimError> {
        Ok(self.all(name).pop())
    }

    pub(crate) fn integer(&mut self, name: &str) -> Result<Option<u64>, SimError> {
        self.single(name)?
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    SimError(format!(
                        "option --{name}: {v:?} is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    pub(crate) fn duration(&mut self, name: &str) -> Result<Option<Duration>, SimError> {
        self.single(name)?
            .map(|v| parse_duration(&v).map_err(|e| SimError(format!("option --{name}: {e}"))))
            .transpose()
    }

    /// Fails on the first option nobody took.
    pub(crate) fn finish(self, what: &str) -> Result<(), SimError> {
        match self.pairs.first() {
            Some((name, _)) => Err(SimError(format!("unknown option --{name} for {what}"))),
            None => Ok(()),
        }
    }
}

/// The lines `ratelimit-sim --help` prints after [`usage`](crate::usage): the
/// subcommands.
pub fn subcommands_usage() -> &'static str {
    "subcommands (each with --help):\n  \
     ratelimit-sim generate NAME [OPTIONS]   print a seeded trace (steady, bursty, poisson, window-edge)\n  \
     ratelimit-sim compare [OPTIONS]         one table row per algorithm on the same trace\n  \
     ratelimit-sim plot [OPTIONS]            an SVG chart, one panel per algorithm"
}

/// One algorithm to run, with the text it was written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgorithmSpec {
    /// The spec as written, whitespace collapsed: `gcra --limit 10 --period 1s`.
    pub label: String,
    /// The algorithm.
    pub algorithm: AnyAlgorithm,
}

impl AlgorithmSpec {
    /// Parses `ALGORITHM [OPTIONS]` as in the main mode, from one string.
    pub fn parse(spec: &str) -> Result<Self, SimError> {
        let words: Vec<String> = spec.split_whitespace().map(String::from).collect();
        let algorithm = parse_algorithm(&words)
            .map_err(|e| SimError(format!("algorithm {:?}: {e}", words.join(" "))))?;
        Ok(Self {
            label: words.join(" "),
            algorithm,
        })
    }

    /// The rate `L per P` the algorithm enforces in the long run: `(L, P)`
    /// (for the token bucket, `(R, P)`).
    pub fn rate(&self) -> (u64, Duration) {
        match &self.algorithm {
            AnyAlgorithm::Gcra(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::TokenBucket(a) => (a.refill(), a.period()),
            AnyAlgorithm::LeakyBucket(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::FixedWindow(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::SlidingLog(a) => (a.rate_limit(), a.period()),
            AnyAlgorithm::SlidingWindow(a) => (a.rate_limit(), a.period()),
        }
    }
}

/// Parses `--algo` values; each may hold several specs separated by `;`.
pub fn parse_specs(values: &[String]) -> Result<Vec<AlgorithmSpec>, SimError> {
    values
        .iter()
        .flat_map(|v| v.split(';'))
        .filter(|s| !s.trim().is_empty())
        .map(AlgorithmSpec::parse)
        .collect()
}

/// The six algorithms at the same rate `L per P`, tuned to the same burst
/// `L`: `gcra` (burst `L`), `token-bucket` (capacity and refill `L`),
/// `leaky-bucket` (queue `L - 1`: `L` at once, the first goes on at once),
/// `fixed-window`, `sliding-log`, `sliding-window`.
pub fn all_algorithms(limit: u64, period: &str) -> Result<Vec<AlgorithmSpec>, SimError> {
    let queue = limit.saturating_sub(1);
    let p = period;
    let specs = [
        format!("gcra --limit {limit} --period {p}"),
        format!("token-bucket --capacity {limit} --refill {limit} --period {p}"),
        format!("leaky-bucket --limit {limit} --period {p} --queue {queue}"),
        format!("fixed-window --limit {limit} --period {p}"),
        format!("sliding-log --limit {limit} --period {p}"),
        format!("sliding-window --limit {limit} --period {p}"),
    ];
    specs.iter().map(|s| AlgorithmSpec::parse(s)).collect()
}

/// Reads a whole trace; a bad line or a time going backwards is an error
/// naming the line.
pub fn read_trace(input: impl BufRead) -> Result<Vec<Event>, SimError> {
    let mut events: Vec<Event> = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let at_line = |e: SimError| SimError(format!("line {}: {}", i + 1, e.0));
        let line = line.map_err(|e| at_line(SimError(format!("i/o error: {e}"))))?;
        let Some(event) = parse_line(&line).map_err(at_line)? else {
            continue;
        };
        if let Some(prev) = events.last() {
            if event.t_ms < prev.t_ms {
                return Err(at_line(SimError(format!(
                    "time {} is before the previous time {}",
                    event.t_ms, prev.t_ms
                ))));
            }
        }
        events.push(event);
    }
    Ok(events)
}

/// The options `plot` and `compare` share: the algorithms and the traffic.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) specs: Vec<AlgorithmSpec>,
    pub(crate) events: Vec<Event>,
}

impl Setup {
    /// Takes `--algo` (repeatable), `--limit`/`--period` (the six
    /// algorithms at that rate when no `--algo` is given; default 10 per
    /// 1s) and `--generator` (repeatable, the traces merged in time order;
    /// without it the trace is read from `input`).
    pub(crate) fn take(flags: &mut Flags, input: impl BufRead) -> Result<Self, SimError> {
        let algos = flags.all("algo");
        let limit = flags.integer("limit")?;
        let period = flags.single("period")?;
        let specs = if algos.is_empty() {
            let limit = limit.unwrap_or(10);
            let period = period.unwrap_or_else(|| "1s".to_owned());
            all_algorithms(limit, &period)?
        } else {
            if limit.is_some() || period.is_some() {
                return Err(SimError(
                    "--limit and --period choose the six algorithms; give them inside --algo instead"
                        .to_owned(),
                ));
            }
            parse_specs(&algos)?
        };
        if specs.is_empty() {
            return Err(SimError("no algorithm given".to_owned()));
        }
        let generators = flags.all("generator");
        let events = if generators.is_empty() {
            read_trace(input)?
        } else {
            let mut events = Vec::new();
            for g in &generators {
                let words: Vec<String> = g.split_whitespace().map(String::from).collect();
                let generator = parse_generator(&words)
                    .map_err(|e| SimError(format!("generator {:?}: {e}", words.join(" "))))?;
                events.extend(generator.events());
            }
            // Merged in time order; a stable sort keeps each generator's order.
            events.sort_by_key(|e| e.t_ms);
            events
        };
        Ok(Self { specs, events })
    }
}

/// The options [`Setup::take`] accepts more than once.
pub(crate) const SETUP_REPEATABLE: &[&str] = &["algo", "generator"];

/// The options of `--algo`, `--generator` and the trace, for the usage texts.
pub(crate) const SETUP_USAGE: &str = "  \
     --algo \"ALGORITHM [OPTIONS]\"    an algorithm as in the main mode; repeat it, or separate several with ';'\n  \
     --limit L --period P            without --algo: all six algorithms at L per P, burst L (default 10 per 1s)\n  \
     --generator \"NAME [OPTIONS]\"    generated traffic (see `ratelimit-sim generate --help`); repeat it to merge\n                                  \
     several; without it, the trace (lines T_MS KEY [COST]) is read on standard input";

/// Keeps algorithms that are built from the same numbers comparable in
/// tests.
#[cfg(test)]
pub(crate) fn spec(s: &str) -> AlgorithmSpec {
    AlgorithmSpec::parse(s).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_take_repeated_and_single_options() {
        let mut f = Flags::parse(
            &strings(&["--algo", "a", "--algo=b", "-o", "x.svg", "--width", "3"]),
            &["algo"],
        )
        .unwrap();
        assert_eq!(f.all("algo"), ["a", "b"]);
        assert_eq!(f.single("svg").unwrap().as_deref(), Some("x.svg"));
        assert_eq!(f.integer("width").unwrap(), Some(3));
        f.finish("plot").unwrap();
    }

    #[test]
    fn flags_reject_bad_input() {
        assert!(Flags::parse(&strings(&["--width", "3", "--width", "4"]), &[]).is_err());
        assert!(Flags::parse(&strings(&["--width"]), &[]).is_err());
        assert!(Flags::parse(&strings(&["width"]), &[]).is_err());
        let f = Flags::parse(&strings(&["--what", "3"]), &[]).unwrap();
        assert_eq!(
            f.finish("plot").unwrap_err().0,
            "unknown option --what for plot"
        );
    }

    #[test]
    fn specs_split_on_semicolons() {
        let specs = parse_specs(&strings(&[
            "gcra --limit 10 --period 1s;  fixed-window  --limit 10 --period 1s ;",
            "sliding-log --limit 5 --period 2s",
        ]))
        .unwrap();
        let labels: Vec<&str> = specs.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "gcra --limit 10 --period 1s",
                "fixed-window --limit 10 --period 1s",
                "sliding-log --limit 5 --period 2s"
            ]
        );
        assert_eq!(specs[2].rate(), (5, Duration::from_secs(2)));
        let err = parse_specs(&strings(&["gcra --limit 0 --period 1s"])).unwrap_err();
        assert!(err
            .0
            .starts_with("algorithm \"gcra --limit 0 --period 1s\": "));
    }

    #[test]
    fn all_algorithms_share_the_rate() {
        let all = all_algorithms(10, "1s").unwrap();
        assert_eq!(all.len(), 6);
        for s in &all {
            assert_eq!(s.rate(), (10, Duration::from_secs(1)), "{}", s.label);
        }
        assert_eq!(
            spec("token-bucket --capacity 5 --refill 2 --period 1s").rate(),
            (2, Duration::from_secs(1))
        );
    }

    #[test]
    fn read_trace_names_the_bad_line() {
        let ok = read_trace("0 a\n# c\n\n5 b 2\n".as_bytes()).unwrap();
        assert_eq!(ok.len(), 2);
        let err = read_trace("0 a\n10 a\n5 a\n".as_bytes()).unwrap_err();
        assert_eq!(err.0, "line 3: time 5 is before the previous time 10");
        let err = read_trace("0 a\nx a\n".as_bytes()).unwrap_err();
        assert!(err.0.starts_with("line 2: bad time"), "{}", err.0);
    }
}
