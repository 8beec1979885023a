//! One limit as the server runs it: its pattern, its live algorithm and its store (built here, and only here).

use crate::limit_config::{EntryPattern, LimitConfig};
use crate::metrics::RuleMetrics;
use ratelimit_core::plumbing::LogThrottle;
use ratelimit_core::{AnyAlgorithm, BanPolicy, BoxStore, LiveAlgorithm};
use ratelimit_redis::{RedisBuildError, StoreSettings};
use std::cmp::Ordering;
use std::sync::OnceLock;

/// A request descriptor's entry: a key and its value.
///
/// ```
/// use ratelimit_server::{Config, Entry, Limits};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 1/1m"
///     descriptors = [{ key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let entries: [Entry<'_>; 1] = [("remote_address", "10.0.0.1")];
/// assert!(limits.find("edge", &entries, "none").is_some());
/// assert!(limits.find("edge", &[("user", "alice")], "none").is_none());
/// ```
pub type Entry<'a> = (&'a str, &'a str);

/// One limit: what descriptors it matches, and how it decides.
///
/// ```
/// use ratelimit_server::{Config, Rule};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "login"
///     domain = "edge"
///     algorithm = "gcra 5/1m"
///     descriptors = [{ key = "path", value = "/login" }, { key = "remote_address" }]
/// "#, "inline", |_| None).unwrap();
/// let rule = Rule::new(config.limits[0].clone(), &config.deployment.store).unwrap();
/// assert!(rule.matches(&[("path", "/login"), ("remote_address", "10.0.0.1")]));
/// assert!(!rule.matches(&[("path", "/"), ("remote_address", "10.0.0.1")]));
/// assert_eq!(rule.key(&[("path", "/login"), ("remote_address", "10.0.0.1")]), "10.0.0.1");
/// ```
#[derive(Debug)]
pub struct Rule {
    /// The limit's settings.
    pub config: LimitConfig,
    /// Its store (`None` for an unlimited limit).
    pub store: Option<BoxStore<String>>,
    /// The algorithm its store follows: a reload changes it in place,
    /// and each key keeps what it has used (`None` for an unlimited limit).
    live: Option<LiveAlgorithm>,
    /// Its log lines (a shadow limit's would-be refusals, store
    /// failures): one per kind per minute.
    pub(crate) logs: LogThrottle<2>,
    /// Its counters, registered on first use.
    metrics: OnceLock<RuleMetrics>,
}

/// The kind of a shadow limit's would-be refusal, in [`Rule::logs`].
pub const LOG_SHADOW: usize = 0;
/// The kind of a store's failure, in [`Rule::logs`].
pub const LOG_STORE: usize = 1;

impl Rule {
    /// The limit of `config`, with its store of `settings` (nothing
    /// connects here: a Redis store connects on first use).
    pub fn new(config: LimitConfig, settings: &StoreSettings) -> Result<Self, RedisBuildError> {
        let (live, store) = match config.algorithm {
            Some(a) => {
                let live = LiveAlgorithm::new(a);
                let store = build_store(settings, &config.name, &live, config.ban)?;
                (Some(live), Some(store))
            }
            None => (None, None),
        };
        Ok(Self::of(config, live, store))
    }

    fn of(
        config: LimitConfig,
        live: Option<LiveAlgorithm>,
        store: Option<BoxStore<String>>,
    ) -> Self {
        Self {
            config,
            store,
            live,
            logs: LogThrottle::new(std::time::Duration::from_secs(60)),
            metrics: OnceLock::new(),
        }
    }

    /// The limit under `config` (its name unchanged, an algorithm on
    /// both), on this limit's store and live algorithm: what each key has
    /// used stays. The algorithm changes when [`LiveAlgorithm::set`] is
    /// called on [`live`](Self::live), not here.
    pub(crate) fn sharing(&self, config: LimitConfig) -> Self {
        Self::of(config, self.live.clone(), self.store.clone())
    }

    /// The live algorithm its store follows (`None` when unlimited).
    pub(crate) fn live(&self) -> Option<&LiveAlgorithm> {
        self.live.as_ref()
    }

    /// Its counters.
    pub(crate) fn metrics(&self) -> &RuleMetrics {
        self.metrics
            .get_or_init(|| RuleMetrics::new(&self.config.name, &self.config.domain))
    }

    /// Whether a descriptor of `entries` is this limit's: the same keys in
    /// the same order, and the fixed values equal.
    pub fn matches(&self, entries: &[Entry<'_>]) -> bool {
        let pattern = &self.config.entries;
        pattern.len() == entries.len()
            && pattern.iter().zip(entries).all(|(p, (k, v))| {
                p.key == *k && p.value.as_deref().is_none_or(|fixed| fixed == *v)
            })
    }

    /// Whether it takes the requests of the plan `plan` (`"none"`: no
    /// plan): a limit without `plan` takes every request.
    pub fn takes(&self, plan: &str) -> bool {
        self.config.plan.as_deref().is_none_or(|p| p == plan)
    }

    /// How many entries take any value (each value a client of its own).
    pub fn varying(&self) -> usize {
        self.config
            .entries
            .iter()
            .filter(|p| p.value.is_none())
            .count()
    }

    /// The state key of a matching descriptor: the varying entries' values.
    /// With one, its value as is (so `POST /check`'s `key` form reaches the
    /// same client); with several, each prefixed with its length.
    pub fn key(&self, entries: &[Entry<'_>]) -> String {
        let mut values = self
            .config
            .entries
            .iter()
            .zip(entries)
            .filter(|(p, _)| p.value.is_none())
            .map(|(_, (_, v))| *v);
        if self.varying() == 1 {
            return values.next().unwrap_or_default().to_owned();
        }
        let mut key = String::new();
        for v in values {
            key.push_str(&v.len().to_string());
            key.push(':');
            key.push_str(v);
        }
        key
    }
}

/// Which of two patterns of one length a descriptor matching both takes:
/// at the first position where one has a fixed value and the other not,
/// the fixed value wins (envoyproxy/ratelimit's walk down its tree).
pub fn more_specific(a: &[EntryPattern], b: &[EntryPattern]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match (x.value.is_some(), y.value.is_some()) {
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
    }
    Ordering::Equal
}

/// The store of the limit `name` following `live` on `settings`, banning
/// a key it refuses for `ban`: the one place a store is built.
fn build_store(
    settings: &StoreSettings,
    name: &str,
    live: &LiveAlgorithm,
    ban: Option<BanPolicy>,
) -> Result<BoxStore<String>, RedisBuildError> {
    Ok(BoxStore::new(settings.build::<String>(name, live, ban)?))
}

/// Whether `settings`' stores can decide `algorithm` (a Redis store
/// refuses what its scripts cannot decide exactly, such as `/year`),
/// found by building one on a thread without a tokio runtime, so that
/// nothing connects.
pub(crate) fn check_algorithm(
    settings: &StoreSettings,
    name: &str,
    algorithm: AnyAlgorithm,
) -> Result<(), RedisBuildError> {
    if matches!(settings, StoreSettings::Memory { .. }) {
        return Ok(());
    }
    std::thread::scope(|s| {
        s.spawn(|| settings.build::<String>(name, algorithm, None).map(drop))
            .join()
            .unwrap_or_else(|_| Err(RedisBuildError::Unsupported(format!("{algorithm}"))))
    })
}
