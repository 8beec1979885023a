//! Where and how `Limits::serve` serves the app (`ServerSettings`):
//! `[server]` with `BIND_ADDR`, `MAX_CONNECTIONS` and
//! `MAX_CONNECTIONS_PER_CLIENT` over it.

use super::env::{Env, Origin, Setting};
use super::error::DeployError;
use super::sections::Server;
use crate::serve::{open_file_limit, ServeOptions};
use std::net::{Ipv4Addr, SocketAddr};

/// Where the app is served when neither `[server] addr` nor `BIND_ADDR`
/// says.
pub const DEFAULT_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 3000);

/// The caps, each with its variable and its field in the file.
const CAPS: [(&str, &str); 2] = [
    ("MAX_CONNECTIONS", "[server] max-connections"),
    (
        "MAX_CONNECTIONS_PER_CLIENT",
        "[server] max-connections-per-client",
    ),
];

/// The app's listener: its address and how it protects itself.
#[derive(Debug, Clone)]
pub(super) struct ServerSettings {
    pub(super) addr: SocketAddr,
    pub(super) options: ServeOptions,
    /// Where the app's, the admin API's and the metrics' addresses came
    /// from (a variable, else the file's field), for the startup lines.
    pub(super) from: [&'static str; 3],
}

/// Each listener's variable and its field in the file.
const ADDRS: [(&str, &str); 3] = [
    ("BIND_ADDR", "[server] addr"),
    ("ADMIN_ADDR", "[admin] address"),
    ("METRICS_ADDR", "[metrics] address"),
];

impl ServerSettings {
    /// `[server]` with the environment over it. Behind proxies (`behind`)
    /// a client has no connection cap of its own unless one is set.
    pub(super) fn resolve(
        file: Option<Server>,
        env: &Env<'_>,
        behind: bool,
    ) -> Result<Self, DeployError> {
        let file = file.unwrap_or_default();
        let addr = env.address("BIND_ADDR", "[server] addr", file.addr)?;
        let values = [file.max_connections, file.max_connections_per_client];
        let set: Vec<(&str, Setting)> = CAPS
            .iter()
            .zip(values)
            .filter_map(|(&(var, field), n)| {
                let setting = env.or_file(var, field, n.map(|n| n.to_string()))?;
                Some((var, setting))
            })
            .collect();
        let value = |var: &str| set.iter().find(|(v, _)| *v == var).map(|(_, s)| s);
        let options = ServeOptions::from_vars(
            |var| value(var).map(|s| s.text.clone()),
            open_file_limit(),
            behind,
        )
        .map_err(|e| match value(e.variable) {
            Some(s) => env.error(s.origin, format!("{:?}: {}", s.text, e.reason)),
            None => env.error(Origin::Env(e.variable), e.reason),
        })?;
        let mut from = ADDRS.map(|(var, field)| if env.get(var).is_some() { var } else { field });
        if addr.is_none() {
            from[0] = "the default";
        }
        Ok(Self {
            addr: addr.unwrap_or(DEFAULT_ADDR),
            options,
            from,
        })
    }
}
