//! The key of a `GET /check` (forward auth): the limit's `key-header`, or the client's address, behind trusted proxies when `[proxies]` names them.

use crate::limit_config::DEFAULT_KEY_HEADER;
use crate::rule::Rule;
use http::request::Parts;
use tower_ratelimit::key::ClientIp;

/// The key `GET /check` checks on `rule` for the request `parts`:
///
/// - the value of the limit's `key-header`, as sent, when it names one;
/// - else the client's address: with trusted proxies (`client_ip`, from
///   `[proxies]`), as tower-ratelimit's [`ClientIp`] finds it (the
///   proxies' header read from the right, believed only from a trusted
///   peer; from any other peer, the peer's address);
/// - else (no proxy trusted) the [`DEFAULT_KEY_HEADER`] as sent.
///
/// The error says what is missing or malformed.
pub(crate) fn forward_key(
    rule: &Rule,
    client_ip: Option<&ClientIp>,
    parts: &Parts,
) -> Result<String, String> {
    let header = match (&rule.config.key_header, client_ip) {
        (Some(header), _) => header.as_str(),
        (None, Some(client_ip)) => {
            return client_ip
                .client_addr(parts)
                .map(|ip| ip.to_string())
                .map_err(|e| format!("the client's address: {e}"));
        }
        (None, None) => DEFAULT_KEY_HEADER,
    };
    match parts.headers.get(header).map(|v| v.to_str()) {
        Some(Ok(key)) if !key.is_empty() => Ok(key.to_owned()),
        _ => Err(format!(
            "no {header} header: limit {:?} keys on it",
            rule.config.name
        )),
    }
}
