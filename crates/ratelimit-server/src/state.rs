//! What the gRPC and HTTP services share: the limits, the settings and the clock.

use crate::config::{Config, ConfigFileError, ServerSettings};
use crate::limits::Limits;
use ratelimit_core::{Clock, SystemClock};
use std::sync::Arc;

/// The server's shared state.
///
/// ```
/// use ratelimit_server::{Config, State};
///
/// let config = Config::parse("", "inline").unwrap();
/// let state = State::new(&config).unwrap();
/// assert!(state.limits.named("nothing").is_none());
/// ```
pub struct State {
    /// The limits.
    pub limits: Limits,
    /// The `[server]` settings.
    pub settings: ServerSettings,
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
            limits: Limits::new(config)?,
            settings: config.server.clone(),
            clock,
        })
    }

    /// The clock's now, in nanoseconds.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }
}
