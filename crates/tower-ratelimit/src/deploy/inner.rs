//! What a deployment's parts share: the loaded file, its settings, the
//! app's options, the applied handle and the stores built.

use super::error::DeployError;
use super::server_settings::ServerSettings;
use super::settings::Deployment;
use crate::policy::{PolicyError, PolicyHandle, PolicyKey, PolicyOptions, PolicyTable};
use ratelimit_redis::AnyStore;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A limit's name and its store.
pub(super) type Built = (String, Arc<AnyStore<PolicyKey>>);

/// What the admin API and readiness share with the `Limits`.
pub(super) struct Inner {
    pub(super) table: PolicyTable,
    pub(super) deployment: Deployment,
    pub(super) server: ServerSettings,
    pub(super) file: Option<PathBuf>,
    /// The file's text as loaded: the watcher reloads what differs.
    pub(super) text: String,
    /// The deployment's own lines as loaded (a reload leaves them).
    pub(super) own: String,
    pub(super) options: Mutex<PolicyOptions>,
    pub(super) handle: OnceLock<Arc<PolicyHandle>>,
    pub(super) stores: Mutex<Vec<Built>>,
}

impl Inner {
    /// An error of the file as a whole.
    pub(super) fn fail(&self, message: String) -> DeployError {
        DeployError::File(PolicyError {
            file: self.file.clone(),
            line: None,
            entry: None,
            message,
        })
    }

    /// The app's options with the file's trusted proxies; refused when
    /// both name proxies.
    pub(super) fn options(&self) -> Result<PolicyOptions, DeployError> {
        let mut options = self
            .options
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(client_ip) = &self.deployment.client_ip {
            if options.client_ip.is_some() {
                let both = "trusted proxies are given by both the file ([proxies], TRUSTED_PROXIES) and the app's options";
                return Err(self.fail(both.to_owned()));
            }
            options.client_ip = Some(client_ip.clone());
        }
        Ok(options)
    }
}
