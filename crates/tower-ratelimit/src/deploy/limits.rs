//! A deployment in one call (`Limits`): the file loaded with the
//! environment over it, applied to a router on the configured store.

use super::env::Env;
use super::error::DeployError;
use super::inner::Inner;
use super::sections::{self, ServerSection};
use super::server_settings::ServerSettings;
use super::settings::Deployment;
use crate::key::ClientIp;
use crate::policy::{PolicyError, PolicyHandle, PolicyKey, PolicyOptions, PolicyTable, StoreSpec};
use axum::Router;
use ratelimit_redis::StoreSettings;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// How often the file is read for changes.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Every limit of a deployment, on its store, from one file: the policy
/// table's `[[limit]]`s with `[store]`, `[proxies]`, `[admin]`,
/// `[metrics]` and `[server]` (see the [module docs](super)), the
/// environment overriding the file.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_ratelimit::deploy::Limits;
///
/// let file = "[store]\nkind = \"memory\"\n\n[[limit]]\nname = \"api\"\nalgorithm = \"gcra 100/1m\"\nkey = \"client-ip\"\n";
/// let limits = Limits::from_toml(file, None, |_| None)?; // or Limits::load(path).await
/// let app = limits.apply(Router::new().route("/", get(|| async { "hi" })))?;
/// assert!(limits.admin_router().is_none()); // off until [admin] or ADMIN_ADDR
/// # let _ = app;
/// # Ok::<(), tower_ratelimit::deploy::DeployError>(())
/// ```
#[derive(Clone)]
pub struct Limits {
    pub(super) inner: Arc<Inner>,
}

/// Why a second `apply` is refused.
const APPLIED: &str = "the limits are applied already: one router per Limits";

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("file", &self.inner.file)
            .field("limits", &self.inner.table.entries().len())
            .field("deployment", &self.inner.deployment)
            .finish_non_exhaustive()
    }
}

impl Limits {
    /// Loads the file at `path`, or at `RATELIMIT_CONFIG` when that is
    /// set, with the process's environment over it (see
    /// [`OVERRIDES`](super::OVERRIDES)).
    pub async fn load(path: impl AsRef<Path>) -> Result<Self, DeployError> {
        let var = |v: &str| std::env::var(v).ok();
        let path = var("RATELIMIT_CONFIG")
            .filter(|p| !p.trim().is_empty())
            .map_or_else(|| path.as_ref().to_path_buf(), PathBuf::from);
        let text = tokio::fs::read_to_string(&path).await.map_err(|e| {
            DeployError::File(PolicyError {
                file: Some(path.clone()),
                line: None,
                entry: None,
                message: format!("cannot read: {e}"),
            })
        })?;
        Self::from_toml(&text, Some(&path), var)
    }

    /// Reads a deployment from TOML text, `file` naming it in errors (and
    /// reloaded from it), `var` looking up the environment's overrides
    /// (and the plans' `keys-env`). A plan with `shared = true` needs the
    /// store in Redis, where the keys moved between plans are shared.
    pub fn from_toml(
        text: &str,
        file: Option<&Path>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, DeployError> {
        let (deployment, rest) = Deployment::split(text, file, &var)?;
        let (table_text, server) = sections::split_sections(&rest, &sections::SERVER);
        let table = PolicyTable::from_toml_with(&table_text, file, &var)?;
        let server: ServerSection = sections::parse_as(&server, file)?;
        let (_, own) = sections::split_sections(text, &sections::LIMITS_SECTIONS);
        let env = Env::new(&var, file, &own);
        let behind_proxies = deployment.client_ip.is_some();
        let server = ServerSettings::resolve(server.server, &env, behind_proxies)?;
        let in_memory = !matches!(deployment.store, StoreSettings::Redis { .. });
        if let Some(plan) = table.plans().iter().find(|p| p.shared && in_memory) {
            return Err(DeployError::File(PolicyError {
                file: file.map(Path::to_path_buf),
                line: None,
                entry: None,
                message: format!(
                    "plan {:?}: shared = true needs the store in Redis ([store] kind = \"redis\", \
                     or REDIS_URL), where the keys moved between plans are shared",
                    plan.name
                ),
            }));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                table,
                deployment,
                server,
                file: file.map(Path::to_path_buf),
                text: text.to_owned(),
                own,
                options: Mutex::default(),
                handle: OnceLock::new(),
                stores: Mutex::default(),
            }),
        })
    }

    /// The app's part of the limits' options (`app:NAME` keys, who is
    /// authenticated). Trusted proxies come from the file: options
    /// naming their own are refused at [`apply`](Self::apply).
    pub fn with_options(self, options: PolicyOptions) -> Self {
        *self
            .inner
            .options
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = options;
        self
    }

    /// Adds a layer for every limit to `router` (add every route first),
    /// each on the configured store with its ban, lease and the key
    /// secret shared through Redis; the file is reloaded on `SIGHUP` and
    /// when it changes (with a tokio runtime). Logs, at `info`, where the
    /// limits live, the trusted proxies and each limit in force. Once
    /// only: a second call is an error.
    pub fn apply(&self, router: Router) -> Result<Router, DeployError> {
        let inner = &self.inner;
        let options = inner.options()?;
        if inner.handle.get().is_some() {
            return Err(inner.fail(APPLIED.to_owned()));
        }
        // Before the stores: their gauges are set as they are built.
        #[cfg(feature = "prometheus")]
        if self.metrics_addr().is_some() {
            super::metrics::recorder();
        }
        inner
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let settings = &inner.deployment.store;
        let store = |spec: &StoreSpec<'_>| {
            let store = settings.build::<PolicyKey>(spec.name(), spec.live(), spec.ban())?;
            let store = Arc::new(store);
            let mut stores = inner.stores.lock().unwrap_or_else(PoisonError::into_inner);
            stores.push((spec.name().to_owned(), Arc::clone(&store)));
            Ok::<_, ratelimit_redis::RedisBuildError>(store)
        };
        let (router, handle) = inner
            .table
            .apply(router, &options, store)
            .map_err(|mut e| {
                e.file = e.file.or_else(|| inner.file.clone());
                DeployError::File(e)
            })?;
        let handle = Arc::new(handle);
        if let Some(entries) = inner
            .deployment
            .shared_entries()
            .map_err(|e| inner.fail(e))?
        {
            handle.share(Arc::new(entries)).map_err(|e| inner.fail(e))?;
        }
        if inner.handle.set(handle).is_err() {
            return Err(inner.fail(APPLIED.to_owned()));
        }
        super::startup_log::log(inner);
        super::watch::start(&self.inner, WATCH_EVERY);
        Ok(router)
    }

    /// The handle of the applied limits (reloads, overrides, lists, each
    /// limit's [`LimitHandle`](crate::policy::LimitHandle)); `None` before
    /// [`apply`](Self::apply).
    pub fn handle(&self) -> Option<&Arc<PolicyHandle>> {
        self.inner.handle.get()
    }

    /// The policy table, as loaded.
    pub fn table(&self) -> &PolicyTable {
        &self.inner.table
    }

    /// The file the limits were loaded from, if any.
    pub fn file(&self) -> Option<&Path> {
        self.inner.file.as_deref()
    }

    /// How `client-ip` finds a client's address: the trusted proxies of
    /// `[proxies]` (or `TRUSTED_PROXIES`) and their header; with none,
    /// the TCP peer's. For the app's own keys and layers.
    pub fn client_ip(&self) -> ClientIp {
        let trusted = self.inner.deployment.client_ip.clone();
        trusted.unwrap_or_default()
    }

    /// Where the limits keep their state.
    pub fn store(&self) -> &StoreSettings {
        &self.inner.deployment.store
    }

    /// Where the admin API should listen (`[admin] address`,
    /// `ADMIN_ADDR`); `None`: off.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.inner.deployment.admin.as_ref().map(|a| a.address)
    }

    /// Where the metrics should be served (`[metrics] address`,
    /// `METRICS_ADDR`); `None`: off.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.inner.deployment.metrics
    }
}
