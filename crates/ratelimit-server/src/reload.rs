//! A configuration reloaded while the server runs: all or nothing, each kept limit keeping what its keys have used.

use crate::config::Config;
use crate::config_error::ConfigFileError;
use crate::limits::Limits;
use crate::rule::{check_algorithm, Rule};
use crate::state::State;
use ratelimit_core::{AnyAlgorithm, LiveAlgorithm};
use std::path::Path;
use std::sync::{Arc, PoisonError};

/// What a reload changed, by limit name.
///
/// ```
/// use ratelimit_server::{Config, State};
///
/// let text = |rate: &str| format!(r#"
///     [[limit]]
///     name = "per-ip"
///     domain = "edge"
///     algorithm = "fixed-window {rate}/1m"
///     descriptors = [{{ key = "remote_address" }}]
/// "#);
/// let state = State::new(&Config::parse(&text("10"), "f.toml", |_| None).unwrap()).unwrap();
/// let reloaded = state.reload(&Config::parse(&text("20"), "f.toml", |_| None).unwrap()).unwrap();
/// assert_eq!(reloaded.changed[0].limit, "per-ip");
/// assert_eq!(reloaded.changed[0].to, "fixed-window 20/1m");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Limits new in the file.
    pub added: Vec<String>,
    /// Limits gone from the file (their state is dropped).
    pub removed: Vec<String>,
    /// Limits whose settings changed.
    pub changed: Vec<RuleChange>,
    /// How many limits are unchanged.
    pub unchanged: usize,
    /// The other settings that changed, in force at once: `[server]
    /// headers`, `[server] refuse-status`, `[proxies]`, `[admin] token`.
    pub settings: Vec<&'static str>,
}

/// One `[[limit]]` rule's change: its algorithm before and after, as text (`unlimited` for
/// none), equal when only other settings changed.
///
/// ```
/// use ratelimit_server::{Config, State};
///
/// let text = |extra: &str| format!(r#"
///     [[limit]]
///     name = "office"
///     domain = "edge"
///     {extra}
///     descriptors = [{{ key = "remote_address", value = "192.0.2.10" }}]
/// "#);
/// let state = State::new(&Config::parse(&text("unlimited = true"), "f.toml", |_| None).unwrap()).unwrap();
/// let limited = Config::parse(&text("algorithm = \"gcra 5/1s\""), "f.toml", |_| None).unwrap();
/// let change = &state.reload(&limited).unwrap().changed[0];
/// assert_eq!((change.from.as_str(), change.to.as_str()), ("unlimited", "gcra 5/1s"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChange {
    /// The limit's name.
    pub limit: String,
    /// Its algorithm before.
    pub from: String,
    /// Its algorithm after.
    pub to: String,
}

/// A live algorithm and the settings it takes once the reload is applied.
type Pending = (LiveAlgorithm, AnyAlgorithm);

impl State {
    /// Puts `config` in force, all or nothing: an error leaves the
    /// running configuration as it was.
    ///
    /// A limit is the same limit by name. Unchanged, it keeps its state
    /// untouched. Changed, it keeps its store: a new algorithm is set on
    /// its live algorithm, which carries each key's used quota over
    /// (ALGORITHMS.md, "Live settings: carry-over": a change frees
    /// nothing, through any number of reloads); a new domain, descriptors,
    /// `shadow` or `key-header` apply at once. A limit turned unlimited
    /// drops its state; one turned limited, or new, starts empty. A kept
    /// limit's `ban` needs a restart. The addresses, `[store]`,
    /// `[metrics] address` and `[admin] address` need a restart: a file
    /// changing them is refused. The admin token and `[proxies]` are
    /// read again, and so are the plans' `keys-file` and `keys-env`
    /// (a plan added, removed or changed otherwise needs a restart); a
    /// limit's `plan` applies at once. Keys moved between plans stay.
    pub fn reload(&self, config: &Config) -> Result<Reloaded, ConfigFileError> {
        let result = self.try_reload(config);
        crate::metrics::reloaded(result.is_ok());
        result
    }

    fn try_reload(&self, config: &Config) -> Result<Reloaded, ConfigFileError> {
        let mut running = self.config.lock().unwrap_or_else(PoisonError::into_inner);
        fixed_unchanged(&running, config)?;
        let old = self.limits();
        let mut reloaded = Reloaded {
            settings: settings_changed(&running, config),
            ..Reloaded::default()
        };
        let mut pending: Vec<Pending> = Vec::new();
        let mut rules = Vec::with_capacity(config.limits.len());
        for limit in &config.limits {
            let rule = match old.named(&limit.name) {
                Some(rule) if rule.config == *limit => {
                    reloaded.unchanged += 1;
                    Arc::clone(rule)
                }
                Some(rule) => {
                    reloaded.changed.push(RuleChange {
                        limit: limit.name.clone(),
                        from: algorithm_text(rule.config.algorithm),
                        to: algorithm_text(limit.algorithm),
                    });
                    Arc::new(changed(rule, limit.clone(), config, &mut pending)?)
                }
                None => {
                    reloaded.added.push(limit.name.clone());
                    Arc::new(new_rule(limit.clone(), config)?)
                }
            };
            rules.push(rule);
        }
        reloaded.removed = old
            .all()
            .map(|r| r.config.name.clone())
            .filter(|name| !config.limits.iter().any(|l| &l.name == name))
            .collect();
        reloaded.removed.sort();
        // The plans' lists last: read all or nothing, then nothing fails.
        self.plans()
            .reload(&config.plans)
            .map_err(|e| ConfigFileError {
                file: e
                    .file
                    .map_or_else(|| config.file.clone(), |f| f.display().to_string()),
                line: e.line,
                limit: None,
                message: e.message,
            })?;
        for (live, algorithm) in pending {
            live.set(algorithm);
        }
        self.swap(Limits::of(rules), config);
        *running = config.clone();
        Ok(reloaded)
    }

    /// Reads the file at `path`, puts the environment's settings over it
    /// (as at start), and [reloads](Self::reload) it.
    pub fn reload_file(&self, path: &Path) -> Result<Reloaded, ConfigFileError> {
        match Config::load(path) {
            Ok(config) => self.reload(&config),
            Err(e) => {
                crate::metrics::reloaded(false);
                Err(e)
            }
        }
    }
}

/// The limit `rule` under its changed settings `limit`: on its store when
/// both have an algorithm (the new one, checked against the store, set
/// once the whole reload is accepted), else a new limit.
fn changed(
    rule: &Rule,
    limit: crate::LimitConfig,
    config: &Config,
    pending: &mut Vec<Pending>,
) -> Result<Rule, ConfigFileError> {
    if rule.config.ban != limit.ban && rule.config.algorithm.is_some() && limit.algorithm.is_some()
    {
        let message =
            "ban changed: a limit's ban is fixed while it runs (restart, or rename the limit)";
        return Err(config.limit_error(&limit.name, message.to_owned()));
    }
    let (Some(live), Some(algorithm)) = (rule.live(), limit.algorithm) else {
        return new_rule(limit, config);
    };
    if rule.config.algorithm != Some(algorithm) {
        check_algorithm(&config.deployment.store, &limit.name, algorithm)
            .map_err(|e| config.limit_error(&limit.name, format!("its store: {e}")))?;
        pending.push((live.clone(), algorithm));
    }
    Ok(rule.sharing(limit))
}

fn new_rule(limit: crate::LimitConfig, config: &Config) -> Result<Rule, ConfigFileError> {
    let name = limit.name.clone();
    Rule::new(limit, &config.deployment.store)
        .map_err(|e| config.limit_error(&name, format!("its store: {e}")))
}

fn algorithm_text(algorithm: Option<AnyAlgorithm>) -> String {
    algorithm.map_or_else(|| "unlimited".to_owned(), |a| a.to_string())
}

/// The settings a reload changes at once, other than limits, that differ
/// between `running` and `new` (a token by whether it differs, never
/// shown).
fn settings_changed(running: &Config, new: &Config) -> Vec<&'static str> {
    let (was, is) = (&running.deployment, &new.deployment);
    let proxies = |d: &tower_ratelimit::deploy::Deployment| {
        d.client_ip.as_ref().map(|c| {
            let header = c.proxy_header().clone();
            (c.trusted().to_vec(), header, c.key_prefixes())
        })
    };
    let token = |d: &tower_ratelimit::deploy::Deployment| d.admin.as_ref().map(|a| a.token.clone());
    let fields = [
        (
            "[server] headers",
            running.server.headers != new.server.headers,
        ),
        (
            "[server] refuse-status",
            running.server.refuse_status != new.server.refuse_status,
        ),
        ("[proxies]", proxies(was) != proxies(is)),
        ("[admin] token", token(was) != token(is)),
    ];
    fields
        .into_iter()
        .filter_map(|(name, differs)| differs.then_some(name))
        .collect()
}

/// Refuses a change of what only a restart can change, naming it.
fn fixed_unchanged(running: &Config, new: &Config) -> Result<(), ConfigFileError> {
    let (was, is) = (&running.deployment, &new.deployment);
    let admin = |d: &tower_ratelimit::deploy::Deployment| d.admin.as_ref().map(|a| a.address);
    let fields = [
        ("[server] grpc", running.server.grpc != new.server.grpc),
        ("[server] http", running.server.http != new.server.http),
        ("[store]", was.store != is.store),
        ("[metrics] address", was.metrics != is.metrics),
        ("[admin] address", admin(was) != admin(is)),
    ];
    match fields.iter().find(|(_, differs)| *differs) {
        Some((field, _)) => Err(ConfigFileError {
            file: new.file.clone(),
            line: None,
            limit: None,
            message: format!("{field} changed: that needs a restart (nothing was reloaded)"),
        }),
        None => Ok(()),
    }
}
