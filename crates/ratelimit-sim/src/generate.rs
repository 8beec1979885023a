//! Seeded traffic generators: steady, bursty, Poisson and the window-edge
//! attack, each producing a trace in the sim's input format.
//!
//! A generator is written like an algorithm on the command line, `NAME
//! [OPTIONS]`:
//!
//! | generator | options | requests |
//! | --- | --- | --- |
//! | `steady` | `--rate N --period P [--jitter J]` | the `i`-th at `floor(i*P/N)`, each pushed later by a random `[0, J)` (default 0) |
//! | `bursty` | `--size S --every E [--spread W]` | a burst of `S` every `E`, starting at a random point of `[k*E, k*E + E/2)`, its requests at random points of the next `W` (default 100ms) |
//! | `poisson` | `--rate N --period P` | a Poisson process of mean rate `N` per `P` (exponential gaps), floored to the millisecond |
//! | `window-edge` | `--limit L --period P [--spread W]` | at each odd boundary `k*P` (`k = 1, 3, 5, ...`), `L` requests evenly in `[k*P - W, k*P)` and `L` in `[k*P, k*P + W)` (default `W = P/10`) |
//!
//! Common options: `--duration D` (default 10s; requests at times `< D`),
//! `--start S` (default 0: every time is shifted by `S`, so the requests
//! fall in `[S, S + D)`), `--seed N` (default 1), `--key K` (default
//! `client`), `--cost N` (default 1).
//!
//! The same options and seed give the same trace every time (the PRNG is
//! splitmix64, in integers; `poisson` alone goes through `f64::ln`, which
//! could differ in the last bit on another platform's math library).
//! `steady` without jitter and `window-edge` use no randomness at all.
//! Times are integer milliseconds, never decreasing. A generator making
//! more than [`MAX_REQUESTS`] requests is refused.
//!
//! The window-edge attack is aimed at a fixed window aligned on `P`: it
//! spends the whole quota `L` at the end of one window and again at the
//! start of the next, so `2L` requests land within `2W` — and then waits
//! one window, since the window after the boundary is spent.

use crate::values::{cli_error, duration};
use crate::{Event, SimError};
use clap::{Args, Parser, Subcommand};

/// A generator and its options, as written after `generate` and in
/// `--generator`. Durations are kept in milliseconds.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "generate", "poisson", "--rate", "20", "--period", "1s"]).unwrap();
/// let Some(Command::Generate { generator }) = cli.command else { panic!() };
/// assert!(generator.build().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum GeneratorArgs {
    /// N requests per P, evenly spaced, each pushed later by a random [0, J)
    Steady {
        /// Requests per period
        #[arg(long, value_name = "N", value_parser = positive)]
        rate: u64,
        /// The period
        #[arg(long, value_name = "P", value_parser = positive_millis)]
        period: u64,
        /// The most a request is pushed later (exclusive)
        #[arg(long, value_name = "J", value_parser = millis, default_value = "0ms")]
        jitter: u64,
        /// The options every generator takes.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Bursts of S requests, one every E, each spread over W
    Bursty {
        /// Requests per burst
        #[arg(long, value_name = "S", value_parser = positive)]
        size: u64,
        /// A burst starts at a random point of the first half of each slot of E
        #[arg(long, value_name = "E", value_parser = positive_millis)]
        every: u64,
        /// How long one burst lasts
        #[arg(long, value_name = "W", value_parser = positive_millis, default_value = "100ms")]
        spread: u64,
        /// The options every generator takes.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// A Poisson process of mean rate N per P
    Poisson {
        /// Mean requests per period
        #[arg(long, value_name = "N", value_parser = positive)]
        rate: u64,
        /// The period
        #[arg(long, value_name = "P", value_parser = positive_millis)]
        period: u64,
        /// The options every generator takes.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// The window-edge attack: L requests just before and L just after every other boundary k*P
    WindowEdge {
        /// The attacked window's quota
        #[arg(long, value_name = "L", value_parser = positive)]
        limit: u64,
        /// The attacked window's length
        #[arg(long, value_name = "P", value_parser = positive_millis)]
        period: u64,
        /// How long before (and after) the boundary the quota is spent [default: P/10]
        #[arg(long, value_name = "W", value_parser = positive_millis)]
        spread: Option<u64>,
        /// The options every generator takes.
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// The options every generator takes.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "generate", "steady", "--rate", "5", "--period", "1s", "--seed", "7"]).unwrap();
/// let Some(Command::Generate { generator }) = cli.command else { panic!() };
/// assert_eq!(generator.build().unwrap().seed, 7);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct CommonArgs {
    /// Requests at times below D (before the shift by --start)
    #[arg(long, value_name = "D", value_parser = millis, default_value = "10s")]
    pub duration: u64,
    /// Every time is shifted by S
    #[arg(long, value_name = "S", value_parser = millis, default_value = "0ms")]
    pub start: u64,
    /// The seed of the random choices
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// The key of every request
    #[arg(long, value_name = "K", default_value = "client")]
    pub key: String,
    /// The cost of every request
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cost: u64,
}

/// A positive integer.
fn positive(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be positive".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A duration in whole milliseconds.
fn millis(s: &str) -> Result<u64, String> {
    // `parse_duration` counts in u64 milliseconds: it always fits.
    duration(s).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration of at least 1ms, in milliseconds.
fn positive_millis(s: &str) -> Result<u64, String> {
    match millis(s)? {
        0 => Err("must be at least 1ms".to_owned()),
        ms => Ok(ms),
    }
}

/// The shape of the traffic.
///
/// ```
/// use ratelimit_sim::{parse_generator, Shape};
///
/// let words = ["window-edge", "--limit", "10", "--period", "1s"];
/// let generator = parse_generator(&words.map(String::from)).unwrap();
/// assert!(matches!(generator.shape, Shape::WindowEdge { limit: 10, period_ms: 1000, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// `rate` requests per `period`, evenly spaced, each delayed by a
    /// random amount below `jitter_ms`.
    Steady {
        /// Requests per period.
        rate: u64,
        /// The period in milliseconds.
        period_ms: u64,
        /// Upper bound (exclusive) of the random delay; 0 for none.
        jitter_ms: u64,
    },
    /// Bursts of `size` requests, one per `every_ms`, each spread over
    /// `spread_ms`.
    Bursty {
        /// Requests per burst.
        size: u64,
        /// Milliseconds between burst slots.
        every_ms: u64,
        /// How long one burst lasts.
        spread_ms: u64,
    },
    /// Poisson arrivals at a mean of `rate` per `period_ms`.
    Poisson {
        /// Mean requests per period.
        rate: u64,
        /// The period in milliseconds.
        period_ms: u64,
    },
    /// The whole quota `limit` just before and just after every other
    /// boundary of a fixed window of `period_ms`.
    WindowEdge {
        /// The quota of the attacked window.
        limit: u64,
        /// The attacked window's length in milliseconds.
        period_ms: u64,
        /// How long before (and after) the boundary the quota is spent.
        spread_ms: u64,
    },
}

/// A generator: a shape and the common options.
///
/// ```
/// use ratelimit_sim::{parse_generator, Generator, Shape};
///
/// let words = ["steady", "--rate", "10", "--period", "1s", "--duration", "2s"];
/// let generator: Generator = parse_generator(&words.map(String::from)).unwrap();
/// assert!(matches!(generator.shape, Shape::Steady { rate: 10, .. }));
/// assert_eq!(generator.events().len(), 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generator {
    /// The shape of the traffic.
    pub shape: Shape,
    /// Requests are generated at times below this, in milliseconds
    /// (before the shift by `start_ms`).
    pub duration_ms: u64,
    /// Added to every time.
    pub start_ms: u64,
    /// The seed of the random choices.
    pub seed: u64,
    /// The key of every request.
    pub key: String,
    /// The cost of every request.
    pub cost: u64,
}

impl GeneratorArgs {
    /// The generator; fails when `--spread` exceeds `--period`, `--start`
    /// plus `--duration` overflows, or it would make more than
    /// [`MAX_REQUESTS`] requests.
    pub fn build(&self) -> Result<Generator, SimError> {
        let (shape, common) = self.shape()?;
        if common.start.checked_add(common.duration).is_none() {
            return Err(SimError(
                "options --start and --duration are too large".to_owned(),
            ));
        }
        let generator = Generator {
            shape,
            duration_ms: common.duration,
            start_ms: common.start,
            seed: common.seed,
            key: common.key.clone(),
            cost: common.cost,
        };
        let expected = generator.expected_requests();
        if expected > MAX_REQUESTS {
            return Err(SimError(format!(
                "this generator would make about {expected} requests, more than {MAX_REQUESTS}"
            )));
        }
        Ok(generator)
    }

    /// The shape of the traffic, and the common options.
    fn shape(&self) -> Result<(Shape, &CommonArgs), SimError> {
        Ok(match self {
            Self::Steady {
                rate,
                period,
                jitter,
                common,
            } => (
                Shape::Steady {
                    rate: *rate,
                    period_ms: *period,
                    jitter_ms: *jitter,
                },
                common,
            ),
            Self::Bursty {
                size,
                every,
                spread,
                common,
            } => (
                Shape::Bursty {
                    size: *size,
                    every_ms: *every,
                    spread_ms: *spread,
                },
                common,
            ),
            Self::Poisson {
                rate,
                period,
                common,
            } => (
                Shape::Poisson {
                    rate: *rate,
                    period_ms: *period,
                },
                common,
            ),
            Self::WindowEdge {
                limit,
                period,
                spread,
                common,
            } => (
                Shape::WindowEdge {
                    limit: *limit,
                    period_ms: *period,
                    spread_ms: edge_spread(*period, *spread)?,
                },
                common,
            ),
        })
    }
}

/// The window-edge attack's spread: `--spread`, by default a tenth of
/// `--period` (at least 1ms); never more than `--period`.
fn edge_spread(period: u64, spread: Option<u64>) -> Result<u64, SimError> {
    let spread_ms = spread.unwrap_or((period / 10).max(1));
    if spread_ms > period {
        return Err(SimError(
            "option --spread must not exceed --period".to_owned(),
        ));
    }
    Ok(spread_ms)
}

/// `NAME [OPTIONS]` on its own, as in `--generator`.
#[derive(Debug, Parser)]
#[command(name = "GENERATOR", no_binary_name = true)]
struct GeneratorLine {
    #[command(subcommand)]
    generator: GeneratorArgs,
}

/// Parses `NAME [OPTIONS]` into a generator.
///
/// ```
/// use ratelimit_sim::parse_generator;
/// let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
/// let g = parse_generator(&words("window-edge --limit 3 --period 1s --duration 2s")).unwrap();
/// let times: Vec<u64> = g.events().iter().map(|e| e.t_ms).collect();
/// assert_eq!(times, [900, 933, 966, 1000, 1033, 1066]);
/// assert!(parse_generator(&words("steady --rate 0 --period 1s")).is_err());
/// ```
pub fn parse_generator(args: &[String]) -> Result<Generator, SimError> {
    if args.is_empty() {
        return Err(SimError("missing generator NAME".to_owned()));
    }
    let line = GeneratorLine::try_parse_from(args).map_err(|e| cli_error(&e, "generator"))?;
    line.generator.build()
}

/// The most requests a generator may make: enough for any chart or table,
/// and a bound on memory.
pub const MAX_REQUESTS: u128 = 5_000_000;

impl Generator {
    /// An upper bound of the number of requests (for `poisson`, the mean).
    pub fn expected_requests(&self) -> u128 {
        let d = u128::from(self.duration_ms);
        match self.shape {
            Shape::Steady {
                rate, period_ms, ..
            } => u128::from(rate) * d / u128::from(period_ms) + 1,
            Shape::Bursty { size, every_ms, .. } => {
                u128::from(size) * (d / u128::from(every_ms) + 1)
            }
            Shape::Poisson { rate, period_ms } => u128::from(rate) * d / u128::from(period_ms),
            Shape::WindowEdge {
                limit, period_ms, ..
            } => 2 * u128::from(limit) * (d / (2 * u128::from(period_ms)) + 1),
        }
    }

    /// The generated requests, in time order.
    pub fn events(&self) -> Vec<Event> {
        let mut rng = SplitMix64(self.seed);
        let mut times = self.shape.times(&mut rng, self.duration_ms);
        times.sort_unstable();
        times
            .into_iter()
            .map(|t_ms| Event {
                t_ms: t_ms + self.start_ms,
                key: self.key.clone(),
                cost: self.cost,
            })
            .collect()
    }
}

impl Shape {
    /// The times of the requests below `end` ms, unsorted.
    fn times(&self, rng: &mut SplitMix64, end: u64) -> Vec<u64> {
        match *self {
            Shape::Steady {
                rate,
                period_ms,
                jitter_ms,
            } => steady(rng, end, rate, period_ms, jitter_ms),
            Shape::Bursty {
                size,
                every_ms,
                spread_ms,
            } => bursty(rng, end, size, every_ms, spread_ms),
            Shape::Poisson { rate, period_ms } => poisson(rng, end, rate, period_ms),
            Shape::WindowEdge {
                limit,
                period_ms,
                spread_ms,
            } => window_edge(end, limit, period_ms, spread_ms),
        }
    }
}

/// `rate` per `period_ms` evenly spaced, each delayed by a random
/// `[0, jitter_ms)`.
fn steady(rng: &mut SplitMix64, end: u64, rate: u64, period_ms: u64, jitter_ms: u64) -> Vec<u64> {
    let mut times = Vec::new();
    for i in 0u64.. {
        // floor(i * P / N), exact.
        let base = u128::from(i) * u128::from(period_ms) / u128::from(rate);
        let Ok(base) = u64::try_from(base) else { break };
        if base >= end {
            break;
        }
        let t = base + rng.below(jitter_ms);
        if t < end {
            times.push(t);
        }
    }
    times
}

/// A burst of `size` in each slot of `every_ms`, starting in its first
/// half, spread over `spread_ms`.
fn bursty(rng: &mut SplitMix64, end: u64, size: u64, every_ms: u64, spread_ms: u64) -> Vec<u64> {
    let mut times = Vec::new();
    let mut slot = 0u64;
    while slot < end {
        let start = slot + rng.below(every_ms.div_ceil(2));
        times.extend(
            (0..size)
                .map(|_| start + rng.below(spread_ms))
                .filter(|&t| t < end),
        );
        slot = slot.saturating_add(every_ms);
    }
    times
}

/// Poisson arrivals at a mean of `rate` per `period_ms`, floored to the
/// millisecond.
fn poisson(rng: &mut SplitMix64, end: u64, rate: u64, period_ms: u64) -> Vec<u64> {
    let mut times = Vec::new();
    let mean = period_ms as f64 / rate as f64;
    let mut t = 0.0f64;
    loop {
        // Exponential gap by inversion; 1 - u is in (0, 1].
        t += -(1.0 - rng.unit()).ln() * mean;
        if t >= end as f64 {
            break;
        }
        times.push(t as u64);
    }
    times
}

/// `limit` requests evenly in the `spread_ms` before, and `limit` in the
/// `spread_ms` after, every other boundary of `period_ms`.
fn window_edge(end: u64, limit: u64, period_ms: u64, spread_ms: u64) -> Vec<u64> {
    let mut times = Vec::new();
    let mut boundary = period_ms;
    while boundary.saturating_sub(spread_ms) < end {
        for i in 0..limit {
            // The i-th of L evenly spaced points of [-W, 0) and [0, W).
            let offset = u128::from(i) * u128::from(spread_ms) / u128::from(limit);
            let offset = offset as u64; // < spread_ms
            times.push(boundary - spread_ms + offset);
        }
        for i in 0..limit {
            let offset = u128::from(i) * u128::from(spread_ms) / u128::from(limit);
            times.push(boundary + offset as u64);
        }
        boundary = boundary.saturating_add(period_ms.saturating_mul(2));
    }
    times.retain(|&t| t < end);
    times
}

/// Formats events as trace lines `T_MS KEY COST`, one per line.
pub fn format_trace(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("{} {} {}\n", e.t_ms, e.key, e.cost));
    }
    out
}

/// `ratelimit-sim generate NAME [OPTIONS]`: prints the generated trace.
pub fn run_generate(
    generator: &Generator,
    mut output: impl std::io::Write,
) -> Result<(), SimError> {
    output
        .write_all(format_trace(&generator.events()).as_bytes())
        .and_then(|()| output.flush())
        .map_err(|e| SimError(format!("i/o error: {e}")))
}

/// splitmix64 (Steele, Lea and Flood): a tiny, well-mixed, seedable PRNG,
/// plenty for traffic shapes.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (0 when `n` is 0), by multiply-high.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`, 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(spec: &str) -> Generator {
        let words: Vec<String> = spec.split_whitespace().map(String::from).collect();
        parse_generator(&words).unwrap()
    }

    fn times(spec: &str) -> Vec<u64> {
        gen(spec).events().iter().map(|e| e.t_ms).collect()
    }

    #[test]
    fn splitmix_matches_reference_values() {
        // First outputs for seed 1234567 from the reference implementation.
        let mut r = SplitMix64(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn steady_is_evenly_spaced_and_exact() {
        assert_eq!(
            times("steady --rate 3 --period 1s --duration 2s"),
            [0, 333, 666, 1000, 1333, 1666]
        );
    }

    #[test]
    fn steady_jitter_is_seeded() {
        let a = times("steady --rate 10 --period 1s --jitter 50ms --seed 7");
        let b = times("steady --rate 10 --period 1s --jitter 50ms --seed 7");
        let c = times("steady --rate 10 --period 1s --jitter 50ms --seed 8");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(a.iter().all(|&t| t < 10_000));
    }

    #[test]
    fn window_edge_fires_the_quota_on_both_sides_of_odd_boundaries() {
        let t = times("window-edge --limit 10 --period 1s --duration 4s");
        let expected: Vec<u64> = [1000u64, 3000]
            .iter()
            .flat_map(|&b| (0..20).map(move |i| b - 100 + i * 10))
            .collect();
        assert_eq!(t, expected);
    }

    #[test]
    fn poisson_is_seeded_and_near_its_rate() {
        let a = times("poisson --rate 20 --period 1s --duration 100s --seed 3");
        assert_eq!(
            a,
            times("poisson --rate 20 --period 1s --duration 100s --seed 3")
        );
        assert_ne!(
            a,
            times("poisson --rate 20 --period 1s --duration 100s --seed 4")
        );
        // 2000 expected; the standard deviation is about 45.
        assert!((1800..2200).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn bursty_bursts_stay_in_their_slot() {
        let t = times("bursty --size 5 --every 2s --spread 100ms --duration 10s --seed 9");
        assert_eq!(t.len(), 25);
        for (k, burst) in t.chunks(5).enumerate() {
            let slot = k as u64 * 2000;
            assert!(
                burst.iter().all(|&x| x >= slot && x < slot + 1100),
                "{burst:?}"
            );
            assert!(burst[4] - burst[0] < 100);
        }
    }

    #[test]
    fn start_shifts_every_request() {
        assert_eq!(
            times("steady --rate 2 --period 1s --duration 2s --start 5s"),
            [5000, 5500, 6000, 6500]
        );
    }

    #[test]
    fn generators_reject_bad_options() {
        let bad = [
            "",
            "zigzag",
            "steady --rate 10",
            "steady --rate x --period 1s",
            "steady --rate 10 --period 1s --burst 3",
            "poisson --rate 10 --period 0ms",
            "window-edge --limit 10 --period 1s --spread 2s",
            "bursty --size 3 --every 1s --duration forever",
            "poisson --rate 1000000 --period 1ms --duration 1h",
            "steady --rate 18446744073709551615 --period 1ms",
            "window-edge --limit 10 --period 1ms --duration 1d",
        ];
        for spec in bad {
            let words: Vec<String> = spec.split_whitespace().map(String::from).collect();
            assert!(parse_generator(&words).is_err(), "{spec:?}");
        }
    }

    #[test]
    fn run_generate_prints_the_trace() {
        let mut out = Vec::new();
        run_generate(
            &gen("window-edge --limit 2 --period 1s --duration 2s --key k"),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "900 k 1\n950 k 1\n1000 k 1\n1050 k 1\n"
        );
    }

    #[test]
    fn format_trace_writes_parseable_lines() {
        let events = gen("steady --rate 2 --period 1s --duration 1s --key k --cost 3").events();
        let text = format_trace(&events);
        assert_eq!(text, "0 k 3\n500 k 3\n");
        for (line, e) in text.lines().zip(&events) {
            assert_eq!(crate::parse_line(line).unwrap().as_ref(), Some(e));
        }
    }
}
