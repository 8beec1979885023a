//! The limits of a configuration, found by domain and descriptor or by name.

use crate::config::Config;
use crate::config_error::ConfigFileError;
use crate::rule::{more_specific, Entry, Rule};
use std::collections::HashMap;
use std::sync::Arc;

/// Every limit of a configuration, indexed for lookups.
///
/// ```
/// use ratelimit_server::{Config, Limits};
///
/// let config = Config::parse(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window 10/1m"
///     descriptors = [{ key = "remote_address" }]
///
///     [[limit]]
///     name = "office"
///     domain = "edge"
///     unlimited = true
///     descriptors = [{ key = "remote_address", value = "10.0.0.1" }]
/// "#, "inline", |_| None).unwrap();
/// let limits = Limits::new(&config).unwrap();
/// let find = |ip| limits.find("edge", &[("remote_address", ip)], "none").map(|r| r.config.name.as_str());
/// assert_eq!(find("10.0.0.1"), Some("office"));
/// assert_eq!(find("10.0.0.2"), Some("per-ip"));
/// assert!(limits.find("other", &[("remote_address", "10.0.0.2")], "none").is_none());
/// ```
#[derive(Debug)]
pub struct Limits {
    /// Each domain's limits, the most specific first.
    by_domain: HashMap<String, Vec<Arc<Rule>>>,
    by_name: HashMap<String, Arc<Rule>>,
}

impl Limits {
    /// The limits of `config`, each with its own store; an error names
    /// the limit whose store cannot be built (a bad Redis URL, an
    /// algorithm the Redis scripts cannot decide exactly).
    pub fn new(config: &Config) -> Result<Self, ConfigFileError> {
        let mut rules = Vec::with_capacity(config.limits.len());
        for limit in &config.limits {
            let rule = Rule::new(limit.clone(), &config.deployment.store)
                .map_err(|e| config.limit_error(&limit.name, format!("its store: {e}")))?;
            rules.push(Arc::new(rule));
        }
        Ok(Self::of(rules))
    }

    /// The limits `rules`, indexed.
    pub(crate) fn of(rules: Vec<Arc<Rule>>) -> Self {
        let mut by_domain: HashMap<String, Vec<Arc<Rule>>> = HashMap::new();
        let mut by_name = HashMap::new();
        for rule in rules {
            by_name.insert(rule.config.name.clone(), Arc::clone(&rule));
            by_domain
                .entry(rule.config.domain.clone())
                .or_default()
                .push(rule);
        }
        for rules in by_domain.values_mut() {
            // Of one pattern, a limit scoped to a plan before one without.
            rules.sort_by(|a, b| {
                let unscoped = |r: &Rule| r.config.plan.is_none();
                let (x, y) = (&a.config.entries, &b.config.entries);
                x.len()
                    .cmp(&y.len())
                    .then_with(|| more_specific(x, y))
                    .then_with(|| unscoped(a).cmp(&unscoped(b)))
            });
        }
        Self { by_domain, by_name }
    }

    /// The limit a descriptor of `entries` in `domain`, of a request in
    /// the plan `plan` (`"none"`: no plan), answers to, if any: the most
    /// specific of those that match and take the plan's requests (of one
    /// pattern, a limit scoped to the plan before one without).
    pub fn find(&self, domain: &str, entries: &[Entry<'_>], plan: &str) -> Option<&Arc<Rule>> {
        self.by_domain
            .get(domain)?
            .iter()
            .find(|rule| rule.matches(entries) && rule.takes(plan))
    }

    /// The limit named `name`.
    pub fn named(&self, name: &str) -> Option<&Arc<Rule>> {
        self.by_name.get(name)
    }

    /// Every limit.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Rule>> {
        self.by_name.values()
    }
}
