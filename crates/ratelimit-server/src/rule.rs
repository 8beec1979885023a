//! One limit as the server runs it: its pattern, its algorithm and its store.

use crate::config::{EntryPattern, LimitConfig};
use ratelimit_core::{BoxStore, LogThrottle};
use ratelimit_redis::{RedisBuildError, StoreSettings};
use std::cmp::Ordering;

/// A request descriptor's entry: a key and its value.
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
/// "#, "inline").unwrap();
/// let rule = Rule::new(config.limits[0].clone(), &config.store).unwrap();
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
    /// Its log lines (a shadow limit's would-be refusals, store
    /// failures): one per kind per minute.
    pub(crate) logs: LogThrottle<2>,
}

/// The kind of a shadow limit's would-be refusal, in [`Rule::logs`].
pub const LOG_SHADOW: usize = 0;
/// The kind of a store's failure, in [`Rule::logs`].
pub const LOG_STORE: usize = 1;

impl Rule {
    /// The limit of `config`, with its store of `settings` (nothing
    /// connects here: a Redis store connects on first use).
    pub fn new(config: LimitConfig, settings: &StoreSettings) -> Result<Self, RedisBuildError> {
        let store = match config.algorithm {
            Some(a) => Some(BoxStore::new(settings.build::<String>(
                &config.name,
                a,
                None,
            )?)),
            None => None,
        };
        Ok(Self {
            config,
            store,
            logs: LogThrottle::new(std::time::Duration::from_secs(60)),
        })
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
