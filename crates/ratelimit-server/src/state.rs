//! What the gRPC and HTTP services share: the limits and settings in force (swapped by a reload), and the clock.

use crate::config::{Config, ServerSettings};
use crate::config_error::ConfigFileError;
use crate::limits::Limits;
use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use ratelimit_core::{Clock, SystemClock};
use std::sync::{Arc, Mutex, PoisonError};
use tower_ratelimit::deploy::AdminToken;
use tower_ratelimit::key::ClientIp;
use tower_ratelimit::policy::{PlanDirectory, NO_PLAN};

/// The server's shared state.
///
/// ```
/// use ratelimit_server::{Config, State};
///
/// let config = Config::parse("", "inline", |_| None).unwrap();
/// let state = State::new(&config).unwrap();
/// assert!(state.limits().named("nothing").is_none());
/// ```
pub struct State {
    /// The limits in force.
    limits: ArcSwap<Limits>,
    /// The `[server]` settings in force.
    settings: ArcSwap<ServerSettings>,
    /// The admin token in force.
    admin_token: ArcSwapOption<AdminToken>,
    /// The trusted proxies in force (`[proxies]`), for `GET /check`.
    client_ip: ArcSwapOption<ClientIp>,
    /// The plans and their members (lists reread at a reload, moves
    /// shared through Redis).
    plans: Arc<PlanDirectory>,
    /// The configuration in force: a reload compares with it, one at a
    /// time.
    pub(crate) config: Mutex<Config>,
    /// The stores' clock.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("limits", &self.limits)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The state of `config`, on the system clock (a Redis store uses
    /// the server's clock instead); fails as [`Limits::new`] does.
    pub fn new(config: &Config) -> Result<Self, ConfigFileError> {
        Self::with_clock(config, Arc::new(SystemClock::new()))
    }

    /// The state of `config`, on `clock`. With plans and the store in
    /// Redis, the keys moved between plans are shared there (which needs
    /// a tokio runtime).
    pub fn with_clock(config: &Config, clock: Arc<dyn Clock>) -> Result<Self, ConfigFileError> {
        Ok(Self {
            limits: ArcSwap::from_pointee(Limits::new(config)?),
            settings: ArcSwap::from_pointee(config.server.clone()),
            admin_token: ArcSwapOption::from(admin_token(config)),
            client_ip: ArcSwapOption::from(client_ip(config)),
            plans: plans(config)?,
            config: Mutex::new(config.clone()),
            clock,
        })
    }

    /// The limits in force (a call in flight keeps those it started with).
    pub fn limits(&self) -> Guard<Arc<Limits>> {
        self.limits.load()
    }

    /// The `[server]` settings in force.
    pub fn settings(&self) -> Guard<Arc<ServerSettings>> {
        self.settings.load()
    }

    /// The plans and their members.
    pub fn plans(&self) -> &Arc<PlanDirectory> {
        &self.plans
    }

    /// The plan of a request whose descriptors' entries are `entries`
    /// (`"none"`: no plan; see [`PlanDirectory::plan_of_values`]: a
    /// plan key's entry is read from the first entry of its name),
    /// counted while the file has plans.
    pub fn request_plan<'a, I>(&self, entries: impl Fn() -> I) -> &'static str
    where
        I: Iterator<Item = (&'a str, &'a str)>,
    {
        if self.plans.plans().is_empty() {
            return NO_PLAN;
        }
        let plan = self
            .plans
            .plan_of_values(|name| entries().find(|(k, _)| *k == name).map(|(_, v)| v));
        crate::metrics::plan_request(plan);
        plan
    }

    /// The admin token in force.
    pub(crate) fn admin_token(&self) -> Option<Arc<AdminToken>> {
        self.admin_token.load_full()
    }

    /// The trusted proxies in force, if any.
    pub(crate) fn client_ip(&self) -> Option<Arc<ClientIp>> {
        self.client_ip.load_full()
    }

    /// Puts `config`'s limits, settings, token and proxies in force.
    pub(crate) fn swap(&self, limits: Limits, config: &Config) {
        self.limits.store(Arc::new(limits));
        self.settings.store(Arc::new(config.server.clone()));
        self.admin_token.store(admin_token(config));
        self.client_ip.store(client_ip(config));
    }

    /// Whether the stores are shared (Redis), so that readiness asks them.
    pub(crate) fn stores_shared(&self) -> bool {
        let config = self.config.lock().unwrap_or_else(PoisonError::into_inner);
        !matches!(
            config.deployment.store,
            ratelimit_redis::StoreSettings::Memory { .. }
        )
    }

    /// The clock's now, in nanoseconds.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }
}

/// The plans of `config`, their moves shared through its Redis store.
fn plans(config: &Config) -> Result<Arc<PlanDirectory>, ConfigFileError> {
    let error = |message: String| ConfigFileError {
        file: config.file.clone(),
        line: None,
        limit: None,
        message,
    };
    let plans = PlanDirectory::of_descriptors(&config.plans).map_err(|e| error(e.to_string()))?;
    let plans = Arc::new(plans);
    if plans.plans().is_empty() {
        return Ok(plans);
    }
    if let Some(entries) = config.deployment.shared_entries().map_err(&error)? {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(error(
                "plans on a Redis store need a tokio runtime (their moves are shared there)"
                    .to_owned(),
            ));
        }
        plans.share(Arc::new(entries)).map_err(error)?;
    }
    Ok(plans)
}

fn admin_token(config: &Config) -> Option<Arc<AdminToken>> {
    let admin = config.deployment.admin.as_ref()?;
    Some(Arc::new(admin.token.clone()))
}

fn client_ip(config: &Config) -> Option<Arc<ClientIp>> {
    config.deployment.client_ip.clone().map(Arc::new)
}
