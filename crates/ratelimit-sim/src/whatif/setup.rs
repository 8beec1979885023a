//! From the command line to engines: the policy files, the client-IP
//! settings, and the keys the app defines.

use super::args::WhatIfArgs;
use super::engine::EngineOptions;
use crate::SimError;
use http::HeaderName;
use std::sync::Arc;
use tower_ratelimit::key::{ClientIp, ProxyHeader};
use tower_ratelimit::policy::{KeySpec, PolicyOptions, PolicyTable};

/// Reads the policy file at `path`: a policy table, or a deployment file
/// whose own sections (where the limits live and who may administer
/// them) a replay has no use for. Its lines keep their numbers in errors.
pub fn load(path: &str) -> Result<PolicyTable, SimError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| SimError(format!("{path}: cannot read: {e}")))?;
    PolicyTable::from_toml(&policy_part(&text), Some(std::path::Path::new(path)))
        .map_err(|e| SimError(e.to_string()))
}

/// The deployment file's sections besides the policy table's.
const DEPLOYMENT_SECTIONS: [&str; 5] = ["store", "proxies", "admin", "metrics", "server"];

/// `text` with the deployment's sections blanked, every line in place.
fn policy_part(text: &str) -> String {
    let mut skip = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let header = line.trim_start().strip_prefix('[').map(|h| {
            let h = h.trim_start_matches('[');
            h[..h.find([']', '.']).unwrap_or(h.len())].trim()
        });
        if let Some(name) = header {
            skip = DEPLOYMENT_SECTIONS.contains(&name);
        }
        out.push_str(if skip { "\n" } else { line });
    }
    out
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

#[cfg(test)]
mod tests {
    use super::policy_part;

    #[test]
    fn a_deployment_files_own_sections_are_blanked_in_place() {
        let text = "allow = []\n[store]\nkind = \"memory\"\n[[limit]]\nname = \"a\"\n[admin]\naddress = \"x\"\n[[plan]]\nname = \"p\"";
        let part = policy_part(text);
        assert_eq!(
            part,
            "allow = []\n\n\n[[limit]]\nname = \"a\"\n\n\n[[plan]]\nname = \"p\""
        );
        assert_eq!(part.lines().count(), text.lines().count());
    }
}
