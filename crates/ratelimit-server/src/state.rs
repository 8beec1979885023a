//! What the gRPC and HTTP services share: the limits and settings in force (swapped by a reload), and the clock.

use crate::config::{Config, ServerSettings};
use crate::config_error::ConfigFileError;
use crate::limits::Limits;
use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use ratelimit_core::{Clock, SystemClock};
use std::sync::{Arc, Mutex, PoisonError};
use tower_ratelimit::deploy::AdminToken;
use tower_ratelimit::key::ClientIp;

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

    /// The state of `config`, on `clock`.
    pub fn with_clock(config: &Config, clock: Arc<dyn Clock>) -> Result<Self, ConfigFileError> {
        Ok(Self {
            limits: ArcSwap::from_pointee(Limits::new(config)?),
            settings: ArcSwap::from_pointee(config.server.clone()),
            admin_token: ArcSwapOption::from(admin_token(config)),
            client_ip: ArcSwapOption::from(client_ip(config)),
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

fn admin_token(config: &Config) -> Option<Arc<AdminToken>> {
    let admin = config.deployment.admin.as_ref()?;
    Some(Arc::new(admin.token.clone()))
}

fn client_ip(config: &Config) -> Option<Arc<ClientIp>> {
    config.deployment.client_ip.clone().map(Arc::new)
}
