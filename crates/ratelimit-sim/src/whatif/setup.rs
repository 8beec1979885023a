//! From the command line to engines: the policy files, the client-IP
//! settings, and the keys the app defines.

use super::args::WhatIfArgs;
use super::engine::EngineOptions;
use crate::SimError;
use http::HeaderName;
use std::sync::Arc;
use tower_ratelimit::key::{ClientIp, ProxyHeader};
use tower_ratelimit::policy::{KeySpec, PolicyOptions, PolicyTable};

/// Reads the policy file at `path`.
pub fn load(path: &str) -> Result<PolicyTable, SimError> {
    PolicyTable::load(path).map_err(|e| SimError(e.to_string()))
}

/// The header a logged forwarding value is sent in, for `header`.
fn header_name(header: &ProxyHeader) -> HeaderName {
    match header {
        ProxyHeader::Forwarded => http::header::FORWARDED,
        ProxyHeader::Single(name) => name.clone(),
        _ => HeaderName::from_static("x-forwarded-for"),
    }
}

/// The `app:NAME` keys `table` uses.
fn app_keys_used(table: &PolicyTable) -> Vec<(String, String)> {
    let mut used = Vec::new();
    for entry in table.entries() {
        for part in entry.key.to_string().split('+') {
            if let Some(name) = part.strip_prefix("app:") {
                used.push((entry.name.clone(), name.to_owned()));
            }
        }
    }
    used
}

/// The engines' options for `args`, checked against every table in
/// `tables`: an `app:NAME` key needs `--app-key NAME=SPEC`.
pub fn options(args: &WhatIfArgs, tables: &[&PolicyTable]) -> Result<EngineOptions, SimError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| SimError(format!("{what}: {e}"));
    let header: ProxyHeader = args
        .proxy_header
        .parse()
        .map_err(|e| bad("bad --proxy-header", &e))?;
    let client_ip = args
        .trusted_proxies
        .parse::<ClientIp>()
        .map_err(|e| bad("bad --trusted-proxies", &e))?
        .header(header.clone());
    let mut policy = PolicyOptions {
        client_ip: Some(client_ip),
        ..PolicyOptions::default()
    };
    for mapping in &args.app_keys {
        let (name, spec) = mapping
            .split_once('=')
            .filter(|(n, s)| !n.is_empty() && !s.is_empty())
            .ok_or_else(|| SimError(format!("bad --app-key {mapping:?}: expected NAME=SPEC")))?;
        let spec: KeySpec = spec
            .parse()
            .map_err(|e: String| bad(&format!("bad --app-key {mapping:?}"), &e))?;
        let key = spec
            .extractor(&policy)
            .map_err(|e| bad(&format!("bad --app-key {mapping:?}"), &e))?;
        policy.app_keys.insert(name.to_owned(), Arc::clone(&key));
    }
    for table in tables {
        if let Some((limit, name)) = app_keys_used(table)
            .into_iter()
            .find(|(_, n)| !policy.app_keys.contains_key(n))
        {
            return Err(SimError(format!(
                "limit {limit:?} keys on \"app:{name}\", which only the app defines: \
                 say what it is with --app-key {name}=SPEC (a key of the table, such as \
                 client-ip, api-key, bearer or header:NAME)"
            )));
        }
    }
    Ok(EngineOptions {
        policy,
        proxy_header: header_name(&header),
        max_keys: args.max_keys as usize,
        redact: args.redact,
    })
}
